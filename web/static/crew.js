// crew serve: live updates of an open page over server-sent events.
// Loaded from the server itself (the Content-Security-Policy allows no
// inline script). It never puts event text into HTML: rows of the event
// log are built with textContent, and the other pages fetch their main
// part again from the server, which escapes it (html/template).
(function () {
  "use strict";
  var body = document.body;

  // Relative times (<time class="ago" datetime="…">) tick every second,
  // formatted as the server formats them (web/funcs.go, dur).
  function dur(ms) {
    var s = Math.floor(ms / 1000), pad = function (n) { return (n < 10 ? "0" : "") + n; };
    if (ms < 0) { return "0s"; }
    if (ms < 1000) { return Math.floor(ms) + "ms"; }
    if (s < 60) { return s + "s"; }
    if (s < 3600) { return Math.floor(s / 60) + "m" + pad(s % 60) + "s"; }
    if (s < 86400) { return Math.floor(s / 3600) + "h" + pad(Math.floor(s / 60) % 60) + "m"; }
    return Math.floor(s / 86400) + "d" + (Math.floor(s / 3600) % 24) + "h";
  }
  setInterval(function () {
    var now = Date.now();
    document.querySelectorAll("time.ago").forEach(function (t) {
      var at = Date.parse(t.getAttribute("datetime"));
      if (!isNaN(at)) {
        t.textContent = dur(now - at);
      }
    });
  }, 1000);

  var stream = body.dataset.stream;
  if (!stream || !window.EventSource) {
    return;
  }
  followLog();
  var live = document.getElementById("live");
  var main = document.getElementById("main");
  var log = document.getElementById("log");
  var maxRows = 5000; // the event log keeps the newest rows
  // The timeline reads the whole log: while a run is busy it is drawn
  // again at most once a second.
  var gap = body.dataset.tab === "timeline" ? 1000 : 0;
  // With life=1 the stream also says when what a task is doing changes
  // with no event (a worker turns quiet): the page is drawn again.
  var source = new EventSource(stream + "?since=" + encodeURIComponent(body.dataset.seq || "0") + (body.dataset.life ? "&life=1" : "") +
    (body.dataset.life && body.dataset.task ? "&task=" + encodeURIComponent(body.dataset.task) : ""));

  function say(text, cls) {
    if (live) {
      live.textContent = text;
      live.className = "live " + cls;
    }
  }
  source.onopen = function () { say("live", "on"); };
  source.onerror = function () { say("reconnecting…", "off"); };

  source.addEventListener("crew", function (e) {
    var row = JSON.parse(e.data);
    body.dataset.seq = String(row.seq);
    if (log) {
      appendRow(row);
    } else if (!body.dataset.task || !row.task || row.task === body.dataset.task) {
      // A thread changes with the events about its task and those about
      // no task (a broadcast, the leader reading or acknowledging).
      refresh();
    }
  });
  source.addEventListener("life", function () { refresh(); });
  source.addEventListener("runs", function () { refresh(); });
  source.addEventListener("damage", function (e) {
    var div = document.createElement("div");
    div.className = "banner damage";
    div.setAttribute("role", "alert");
    div.textContent = "The log is damaged: " + e.data;
    main.insertBefore(div, main.firstChild);
  });

  // followLog shows the worker log of a task's page as it grows (the
  // stream of web/worklog.go), as text, keeping its last maxLog
  // characters, and keeps the view at its end while it was there.
  var maxLog = 1 << 20;
  function followLog() {
    var pre = document.getElementById("worker-log");
    if (!pre || pre.dataset.following) {
      return;
    }
    pre.dataset.following = "1";
    var state = function (text) {
      var el = document.getElementById("worker-log-state");
      if (el) {
        el.textContent = text;
      }
    };
    var src = new EventSource(pre.dataset.log);
    src.addEventListener("log", function (e) {
      var part = JSON.parse(e.data);
      var atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 20;
      if (part.start) {
        pre.textContent = part.skipped ? "… (" + part.skipped + " bytes before)\n" : "";
      }
      pre.appendChild(document.createTextNode(part.text));
      if (pre.textContent.length > maxLog) {
        pre.textContent = pre.textContent.slice(-maxLog);
      }
      if (atEnd) {
        pre.scrollTop = pre.scrollHeight;
      }
      pre.dataset.bytes = String((Number(pre.dataset.bytes) || 0) + part.text.length);
      state("following");
    });
    src.addEventListener("nolog", function (e) { state(e.data); });
    src.onerror = function () { state("reconnecting…"); };
  }

  function cell(tr, text) {
    var td = document.createElement("td");
    td.textContent = text;
    tr.appendChild(td);
    return td;
  }
  function appendRow(row) {
    var tr = document.createElement("tr");
    tr.dataset.seq = String(row.seq);
    cell(tr, String(row.seq));
    cell(tr, row.at);
    cell(tr, row.type);
    var td = cell(tr, "");
    if (row.task) {
      var a = document.createElement("a");
      a.href = location.pathname.replace(/\/events$/, "/tasks/") + encodeURIComponent(row.task);
      a.textContent = row.task;
      td.appendChild(a);
    }
    cell(tr, row.actor || "");
    cell(tr, row.summary || "").className = "what";
    log.appendChild(tr);
    while (log.rows.length > maxRows) {
      log.deleteRow(0);
    }
    var atEnd = window.innerHeight + window.scrollY >= document.body.scrollHeight - 80;
    if (atEnd) {
      tr.scrollIntoView({block: "end"});
    }
  }

  // refresh fetches the page's main part again; events arriving while a
  // fetch runs make one more fetch after it. What the person is typing
  // survives the swap.
  var busy = false, again = false;
  function refresh() {
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    fetch(location.pathname + "?fragment=1", {credentials: "same-origin"})
      .then(function (r) {
        if (!r.ok) {
          throw new Error("HTTP " + r.status);
        }
        return r.text();
      })
      .then(swap)
      .catch(function (err) { say("update failed: " + err.message, "off"); })
      .finally(function () {
        setTimeout(function () {
          busy = false;
          if (again) {
            again = false;
            refresh();
          }
        }, gap);
      });
  }

  function key(el) {
    var form = el.form ? el.form.getAttribute("action") : "";
    return form + "#" + el.name;
  }
  function swap(html) {
    var kept = {}, focus = null;
    main.querySelectorAll("textarea, input[type=text], select").forEach(function (el) {
      kept[key(el)] = el.value;
      if (el === document.activeElement) {
        focus = {key: key(el), start: el.selectionStart, end: el.selectionEnd};
      }
    });
    var open = {};
    main.querySelectorAll("details").forEach(function (d, i) { open[i] = d.open; });
    // The worker log is followed by its own stream: the element showing
    // it is kept across the swap.
    var workerLog = document.getElementById("worker-log");
    var logState = document.getElementById("worker-log-state");
    main.innerHTML = html;
    var fresh = document.getElementById("worker-log");
    if (workerLog && fresh) {
      fresh.replaceWith(workerLog);
      document.getElementById("worker-log-state").replaceWith(logState);
    } else if (fresh) {
      followLog();
    }
    main.querySelectorAll("textarea, input[type=text], select").forEach(function (el) {
      var k = key(el);
      if (Object.prototype.hasOwnProperty.call(kept, k)) {
        el.value = kept[k];
      }
      if (focus && focus.key === k) {
        el.focus();
        if (el.setSelectionRange && focus.start !== null) {
          el.setSelectionRange(focus.start, focus.end);
        }
      }
    });
    main.querySelectorAll("details").forEach(function (d, i) { if (open[i]) { d.open = true; } });
    body.dataset.updated = body.dataset.seq;
  }
})();
