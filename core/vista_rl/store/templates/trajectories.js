(function () {
  "use strict";
  var episodes = Array.prototype.slice.call(document.querySelectorAll("details.ep"));
  var shown = document.getElementById("shown");
  var current = "all";

  function counts() {
    var out = {all: episodes.length, success: 0, failed: 0, error: 0};
    episodes.forEach(function (ep) {
      ["success", "failed", "error"].forEach(function (kind) {
        if (ep.classList.contains(kind)) { out[kind] += 1; }
      });
    });
    return out;
  }

  function filter(kind) {
    current = kind;
    var visible = 0;
    episodes.forEach(function (ep) {
      var on = kind === "all" || ep.classList.contains(kind);
      ep.style.display = on ? "" : "none";
      if (on) { visible += 1; }
    });
    document.querySelectorAll("#filters button[data-filter]").forEach(function (button) {
      button.classList.toggle("active", button.getAttribute("data-filter") === kind);
    });
    shown.textContent = visible + " of " + episodes.length + " episode(s) shown";
  }

  var total = counts();
  document.querySelectorAll("#filters button[data-filter]").forEach(function (button) {
    var kind = button.getAttribute("data-filter");
    button.textContent = button.textContent + " (" + total[kind] + ")";
    button.addEventListener("click", function () { filter(kind); });
  });
  document.getElementById("expand-all").addEventListener("click", function () {
    episodes.forEach(function (ep) { if (ep.style.display !== "none") { ep.open = true; } });
  });
  document.getElementById("collapse-all").addEventListener("click", function () {
    episodes.forEach(function (ep) { ep.open = false; });
  });

  // Stepping: one episode alone, one turn at a time.
  var stepping = null;

  function show(ep, index) {
    var turns = ep.querySelectorAll("section.turn");
    if (!turns.length) { ep.querySelector(".pos").textContent = "no turns"; return; }
    index = Math.max(0, Math.min(turns.length - 1, index));
    turns.forEach(function (turn, i) { turn.classList.toggle("current", i === index); });
    ep.setAttribute("data-step", String(index));
    ep.classList.toggle("at-end", index === turns.length - 1);
    ep.querySelector(".pos").textContent = " turn " + (index + 1) + " of " + turns.length + " ";
    ep.querySelector(".prev").disabled = index === 0;
    ep.querySelector(".next").disabled = index === turns.length - 1;
  }

  function open(ep) {
    if (stepping && stepping !== ep) { close(); }
    stepping = ep;
    ep.style.display = "";
    ep.open = true;
    ep.classList.add("stepping");
    document.body.classList.add("focus");
    show(ep, 0);
    window.scrollTo(0, 0);
  }

  function close() {
    if (!stepping) { return; }
    stepping.classList.remove("stepping");
    document.body.classList.remove("focus");
    stepping = null;
    if (location.hash) { history.replaceState(null, "", location.pathname + location.search); }
    filter(current);
  }

  function step(delta) {
    if (stepping) { show(stepping, Number(stepping.getAttribute("data-step")) + delta); }
  }

  episodes.forEach(function (ep) {
    ep.querySelector(".step-open").addEventListener("click", function () { open(ep); });
    ep.querySelector(".prev").addEventListener("click", function () { step(-1); });
    ep.querySelector(".next").addEventListener("click", function () { step(1); });
    ep.querySelector(".close").addEventListener("click", close);
  });
  document.addEventListener("keydown", function (event) {
    if (!stepping) { return; }
    if (event.key === "ArrowLeft") { step(-1); }
    else if (event.key === "ArrowRight") { step(1); }
    else if (event.key === "Escape") { close(); }
  });

  function fromHash() {
    var match = /^#ep-(\d+)$/.exec(location.hash);
    var ep = match && document.getElementById("ep-" + match[1]);
    if (ep) { open(ep); }
  }
  window.addEventListener("hashchange", fromHash);
  filter("all");
  fromHash();
})();
