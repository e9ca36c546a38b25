"use strict";
// Hover: the turn nearest the pointer in each run, read from the JSON the page carries.
(function () {
  var source = document.getElementById("report-data");
  var tip = document.getElementById("tip");
  if (!source || !tip) return;
  var data = JSON.parse(source.textContent);
  var number = new Intl.NumberFormat("en-US");

  // Index of the message nearest x in an ascending array (-1 when empty).
  function nearest(messages, x) {
    var lo = 0, hi = messages.length - 1;
    if (hi < 0) return -1;
    while (lo < hi) {
      var mid = (lo + hi) >> 1;
      if (messages[mid] < x) lo = mid + 1; else hi = mid;
    }
    if (lo > 0 && x - messages[lo - 1] <= messages[lo] - x) lo -= 1;
    return lo;
  }

  function line(run, i) {
    var parts = [run.name + "  message " + number.format(run.m[i]), number.format(run.t[i]) + " tokens"];
    if (run.p[i] !== null) parts.push("prefix " + (run.p[i] / 10).toFixed(1) + "%");
    if (run.e[i] !== null) parts.push((run.e[i] / 1000).toFixed(2) + " ms");
    var outcome = data.outcomes[run.o[i]];
    if (outcome !== "ok") parts.push(outcome);
    return parts.join("  ");
  }

  document.querySelectorAll("svg[data-plot]").forEach(function (svg) {
    var d = svg.dataset;
    var x0 = +d.x0, x1 = +d.x1, left = +d.left, right = +d.right;
    var guide = svg.querySelector(".guide");
    function hide() {
      tip.hidden = true;
      if (guide) guide.setAttribute("visibility", "hidden");
    }
    svg.addEventListener("pointerleave", hide);
    svg.addEventListener("pointermove", function (event) {
      var matrix = svg.getScreenCTM();
      if (!matrix) return;
      var p = new DOMPoint(event.clientX, event.clientY).matrixTransform(matrix.inverse());
      if (p.x < left || p.x > right || right <= left) return hide();
      var message = x0 + ((p.x - left) / (right - left)) * (x1 - x0);
      var lines = [];
      data.runs.forEach(function (run) {
        var i = nearest(run.m, message);
        if (i >= 0) lines.push(line(run, i));
      });
      if (!lines.length) return hide();
      tip.textContent = lines.join("\n");
      tip.hidden = false;
      tip.style.left = Math.min(event.pageX + 14, window.scrollX + document.documentElement.clientWidth - tip.offsetWidth - 8) + "px";
      tip.style.top = event.pageY + 14 + "px";
      if (guide) {
        guide.setAttribute("transform", "translate(" + p.x.toFixed(1) + ",0)");
        guide.setAttribute("visibility", "visible");
      }
    });
  });
})();
