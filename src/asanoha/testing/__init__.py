"""Test support: the ``asanoha_stack`` pytest fixture, its HTTP helper and test users."""

from asanoha.testing.http_client import HttpError, StackHttp
from asanoha.testing.stack import Stack
from asanoha.testing.users import TestUsers

__all__ = ["HttpError", "Stack", "StackHttp", "TestUsers"]
