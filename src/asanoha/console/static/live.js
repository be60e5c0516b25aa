// The console's live pages: follow the feed the page names (<body data-live-url>, served by
// /console/live with the session cookie) and, on an event, reload the page's live regions
// ([data-live-region], matched by id) from the same URL, in place.
//
// Without this script the pages are plain HTML: every link and form works, a reload shows
// what changed. With it:
// - a burst of events costs one reload: at most one a second, the events of the wait
//   coalesced, never two at once;
// - only the live regions are swapped: the filter and run forms keep what was typed, the
//   scroll stays, a region that holds the focus is left alone;
// - a hidden tab closes its feed, and reconnects (and reloads) when shown again; every
//   (re)connection reloads, for what happened while it was not connected;
// - a region marked [data-live-poll=<seconds>] (something moves that sends no event, such
//   as a consumer working through its lag) also reloads after that long.
(function () {
  "use strict";

  var url = document.body.getAttribute("data-live-url");
  var indicator = document.getElementById("live");
  if (!url || !indicator || !window.EventSource || !window.fetch || !window.DOMParser) {
    return;
  }
  // The shortest time between the starts of two reloads, in milliseconds.
  var GAP = 1000;

  var source = null;
  var timer = null;
  var pollTimer = null;
  var busy = false;
  var again = false;
  var ended = false;
  var lastStart = 0;

  function show(state, text) {
    indicator.hidden = false;
    indicator.setAttribute("data-state", state);
    indicator.textContent = text;
  }

  // Ask for a reload: now if the last one started long enough ago, else at the end of the
  // gap; requests meanwhile join it.
  function schedule() {
    if (ended || document.hidden) {
      return;
    }
    if (busy) {
      again = true;
      return;
    }
    if (timer !== null) {
      return;
    }
    var wait = Math.max(0, lastStart + GAP - Date.now());
    timer = window.setTimeout(function () {
      timer = null;
      reload();
    }, wait);
  }

  function reload() {
    if (ended || document.hidden) {
      return;
    }
    busy = true;
    lastStart = Date.now();
    if (pollTimer !== null) {
      window.clearTimeout(pollTimer);
      pollTimer = null;
    }
    window
      .fetch(window.location.href, {
        credentials: "same-origin",
        cache: "no-store",
        headers: { Accept: "text/html" },
      })
      .then(function (response) {
        if (response.redirected) {
          // Sent to the login page: the session ended.
          end("signed out: reload the page");
          return null;
        }
        return response.ok ? response.text() : null;
      })
      .then(function (text) {
        if (text !== null) {
          swap(new window.DOMParser().parseFromString(text, "text/html"));
        }
      })
      .catch(function () {
        // The server is away for a moment: the next event or connection tries again.
      })
      .then(function () {
        busy = false;
        if (again) {
          again = false;
          schedule();
        }
      });
  }

  function swap(fresh) {
    var regions = document.querySelectorAll("[data-live-region][id]");
    for (var i = 0; i < regions.length; i++) {
      var old = regions[i];
      var found = fresh.getElementById(old.id);
      if (!found || old.outerHTML === found.outerHTML) {
        continue;
      }
      if (old.contains(document.activeElement)) {
        // Someone is about to press a button of it: it waits for the next reload.
        continue;
      }
      old.replaceWith(document.importNode(found, true));
    }
    var poll = document.querySelector("[data-live-poll]");
    if (poll !== null && !ended) {
      var seconds = Number(poll.getAttribute("data-live-poll")) || 5;
      pollTimer = window.setTimeout(schedule, Math.max(seconds * 1000, GAP));
    }
  }

  function connect() {
    if (source !== null || ended) {
      return;
    }
    show("connecting", "connecting");
    source = new window.EventSource(url);
    source.onopen = function () {
      show("live", "live");
      schedule();
    };
    source.onmessage = schedule;
    source.onerror = function () {
      if (source !== null && source.readyState === window.EventSource.CLOSED) {
        // Refused (the session ended): EventSource does not try again.
        source = null;
        end("not live: reload the page");
      } else {
        show("connecting", "reconnecting");
      }
    };
  }

  function disconnect() {
    if (source !== null) {
      source.close();
      source = null;
    }
  }

  function end(text) {
    ended = true;
    disconnect();
    show("off", text);
  }

  document.addEventListener("visibilitychange", function () {
    if (document.hidden) {
      disconnect();
      if (!ended) {
        show("paused", "paused");
      }
    } else {
      connect();
    }
  });
  if (document.hidden) {
    show("paused", "paused");
  } else {
    connect();
  }
})();
