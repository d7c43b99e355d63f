// The inbox's live list: listens to the server's events and swaps in the
// new list without reloading the page. Rows already on the page are kept
// as they are, so a half-written comment or edit survives an update.
(function () {
  "use strict";

  var base = document.body.getAttribute("data-base") || "";

  // An edit starts from the arguments shown, when they are shown whole
  // (the page sends them once; a cut card links to the question's page).
  document.addEventListener("toggle", function (event) {
    var details = event.target;
    if (!details.classList || !details.classList.contains("edit-details") || !details.open) {
      return;
    }
    var row = details.closest(".question");
    var shown = row && row.querySelector("pre.arguments[data-complete='true']");
    var area = details.querySelector("textarea.edit-arguments");
    if (shown && area && area.value === "") {
      area.value = shown.textContent;
    }
  }, true);

  var region = document.getElementById("pending");
  if (!region) {
    return;
  }
  // A later page of the list stays that page when it updates.
  var after = new URLSearchParams(window.location.search).get("after");
  var fragment = base + "/fragments/pending" + (after ? "?after=" + encodeURIComponent(after) : "");
  var status = document.getElementById("live-status");
  // The server's clock minus this one: the countdown follows the server.
  var skew = 0;

  function say(text) {
    if (status) {
      status.textContent = text;
    }
  }

  function readSkew(list) {
    var now = Number(list.getAttribute("data-now-ms"));
    if (now > 0) {
      skew = now - Date.now();
    }
  }

  function words(ms) {
    var seconds = Math.floor(ms / 1000);
    if (seconds <= 0) {
      return "expired";
    }
    var hours = Math.floor(seconds / 3600);
    var minutes = Math.floor(seconds / 60) % 60;
    var rest = seconds % 60;
    var two = function (n) { return (n < 10 ? "0" : "") + n; };
    if (hours > 0) {
      return hours + " h " + two(minutes) + " min";
    }
    if (minutes > 0) {
      return minutes + " min " + two(rest) + " s";
    }
    return rest + " s";
  }

  function tick() {
    var now = Date.now() + skew;
    var clocks = region.querySelectorAll(".time-left[data-deadline-ms]");
    for (var i = 0; i < clocks.length; i++) {
      var left = Number(clocks[i].getAttribute("data-deadline-ms")) - now;
      clocks[i].textContent = words(left);
      var row = clocks[i].closest(".question");
      if (row) {
        row.classList.toggle("expired", left <= 0);
      }
    }
  }

  function merge(html) {
    var template = document.createElement("template");
    template.innerHTML = html;
    var fresh = template.content.getElementById("pending-list");
    var list = document.getElementById("pending-list");
    if (!fresh || !list) {
      return;
    }
    readSkew(fresh);
    list.setAttribute("data-now-ms", fresh.getAttribute("data-now-ms") || "");
    var wanted = {};
    var freshRows = fresh.querySelectorAll(".question[data-question-id]");
    for (var i = 0; i < freshRows.length; i++) {
      wanted[freshRows[i].getAttribute("data-question-id")] = freshRows[i];
    }
    // Drop the rows of questions no longer pending.
    var oldRows = list.querySelectorAll(".question[data-question-id]");
    var kept = {};
    for (var j = 0; j < oldRows.length; j++) {
      var id = oldRows[j].getAttribute("data-question-id");
      if (wanted[id]) {
        kept[id] = oldRows[j];
      } else {
        oldRows[j].remove();
      }
    }
    // Insert the new ones in the server's order, keeping the others.
    var previous = null;
    for (var k = 0; k < freshRows.length; k++) {
      var key = freshRows[k].getAttribute("data-question-id");
      var row = kept[key];
      if (!row) {
        row = document.importNode(freshRows[k], true);
        list.insertBefore(row, previous ? previous.nextSibling : list.firstChild);
      }
      previous = row;
    }
    var count = template.content.getElementById("pending-count");
    var shownCount = document.getElementById("pending-count");
    if (count && shownCount) {
      shownCount.textContent = count.textContent;
    }
    var pages = template.content.getElementById("pages");
    var shownPages = document.getElementById("pages");
    if (pages && shownPages) {
      shownPages.innerHTML = pages.innerHTML;
    }
    var none = document.getElementById("no-pending");
    if (none) {
      none.hidden = freshRows.length > 0;
    }
    tick();
  }

  var loading = false;
  var again = false;

  function refresh() {
    if (loading) {
      again = true;
      return;
    }
    loading = true;
    fetch(fragment, { credentials: "same-origin", cache: "no-store" })
      .then(function (response) {
        if (response.status === 401) {
          window.location.assign(base + "/login");
          return null;
        }
        if (!response.ok) {
          say("Could not update the list (" + response.status + "); retrying on the next change.");
          return null;
        }
        return response.text();
      })
      .then(function (html) {
        if (html !== null) {
          merge(html);
          say("");
        }
      })
      .catch(function () {
        say("Could not reach the inbox; retrying on the next change.");
      })
      .then(function () {
        loading = false;
        if (again) {
          again = false;
          refresh();
        }
      });
  }

  var list = document.getElementById("pending-list");
  if (list) {
    readSkew(list);
  }
  tick();
  window.setInterval(tick, 1000);

  if (window.EventSource) {
    var events = new EventSource(base + "/events");
    // Changes come in bursts (a crew asking many at once): one fetch each
    // tenth of a second at most.
    var pending = null;
    events.addEventListener("change", function () {
      if (pending === null) {
        pending = window.setTimeout(function () {
          pending = null;
          refresh();
        }, 100);
      }
    });
    // The session ended (signed out elsewhere, revoked, expired): the
    // stream says so and ends; sign in again.
    events.addEventListener("signed-out", function () {
      events.close();
      window.location.assign(base + "/login");
    });
    // Whenever the stream opens, what changed while it was not listening
    // is fetched at once: between the page and the stream's first start
    // (a question asked then is told to no one), or while it reconnected.
    events.addEventListener("open", function () {
      refresh();
      say("");
    });
    events.addEventListener("error", function () {
      say("Live updates interrupted; reconnecting…");
    });
  } else {
    window.setInterval(refresh, 5000);
  }
})();
