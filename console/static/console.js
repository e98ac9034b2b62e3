// ax console: live refresh, the lease countdown, the sign-in link's token.
// Everything works without this file; it only makes pages nicer to watch.
"use strict";
(function () {
  var main = document.getElementById("main");

  // busy: the caller is filling a form on the page — do not replace it.
  function busy() {
    var a = document.activeElement;
    if (a && a !== document.body && main.contains(a) && a.closest("form")) return true;
    var boxes = main.querySelectorAll("form[data-selection] input[type=checkbox]");
    for (var i = 0; i < boxes.length; i++) if (boxes[i].checked) return true;
    var texts = main.querySelectorAll("textarea, input[name=reason], input[name=confirm]");
    for (var j = 0; j < texts.length; j++) if (texts[j].value !== "") return true;
    return false;
  }

  var every = main && Number(main.getAttribute("data-live"));
  var paused = false, timer = null;

  function refresh() {
    timer = null;
    if (paused || document.hidden || busy()) { schedule(); return; }
    fetch(location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) {
        if (r.redirected || !r.ok) { paused = true; showPaused("refresh stopped (" + r.status + "): reload the page"); return null; }
        return r.text();
      })
      .then(function (html) {
        if (html === null || html === undefined) return;
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("main");
        if (fresh && !busy()) { main.replaceChildren.apply(main, Array.prototype.slice.call(fresh.childNodes)); wire(); }
        schedule();
      })
      .catch(function () { schedule(); });
  }

  function schedule() {
    if (every > 0 && !paused && timer === null) timer = setTimeout(refresh, every * 1000);
  }

  function showPaused(text) {
    var ctl = main.querySelector("[data-live-control]");
    if (!ctl) return;
    ctl.replaceChildren();
    var dot = document.createElement("span");
    dot.className = "dot" + (paused ? " paused" : "");
    dot.setAttribute("aria-hidden", "true");
    var a = document.createElement("a");
    a.href = location.href;
    a.setAttribute("data-live-toggle", "");
    a.textContent = paused ? "Resume live refresh" : "Pause";
    ctl.append(dot, " " + text + " · ", a);
    wire();
  }

  // wire makes the pause link toggle in place, and starts the countdowns.
  function wire() {
    var t = main.querySelector("[data-live-toggle]");
    if (t && every > 0) {
      t.onclick = function (e) {
        e.preventDefault();
        paused = !paused;
        if (paused) { clearTimeout(timer); timer = null; showPaused("Paused"); }
        else { showPaused("Live, every " + every + " s"); refresh(); }
      };
    }
  }

  function countdown() {
    var els = document.querySelectorAll("[data-countdown]");
    for (var i = 0; i < els.length; i++) {
      var left = Date.parse(els[i].getAttribute("data-countdown")) - Date.now();
      els[i].textContent = left > 0 ? (left / 1000).toFixed(1) + " s" : "expired";
    }
  }

  // The sign-in link a demo prints carries its token after "#token=": fill the form
  // in (the fragment never reaches a server).
  var token = document.getElementById("token");
  if (token && location.hash.indexOf("#token=") === 0) {
    token.value = decodeURIComponent(location.hash.slice(7));
    history.replaceState(null, "", location.pathname + location.search);
    // Not submitted: a link must not sign anyone in without their click.
    var button = token.form.querySelector("button");
    if (button) button.focus();
  }

  if (main) { wire(); schedule(); setInterval(countdown, 200); }
})();
