"""The live feed: committed events, as each caller may see them, pushed to many clients.

``reader`` reads the event log with the consumers' gap rules and hands out events only up to
a settled position; ``access`` decides which caller sees which event and shapes it with the
query API's rules; ``hub`` is the one reader of a process fanning out to its subscriptions;
``sse`` writes Server-Sent Events. No FastAPI here: ``platform/http/stream.py`` serves it.
"""

from asanoha.platform.feed.access import FeedAccess, FeedItem
from asanoha.platform.feed.filters import FeedFilter
from asanoha.platform.feed.hub import FeedHub, Subscription
from asanoha.platform.feed.reader import FeedReader

__all__ = ["FeedAccess", "FeedFilter", "FeedHub", "FeedItem", "FeedReader", "Subscription"]
