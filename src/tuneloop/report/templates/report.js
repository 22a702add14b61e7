// report.html's flips table: filter by text and direction, sort by a column. Vanilla, inline.
(function () {
  "use strict";
  var table = document.getElementById("flips");
  if (!table) { return; }
  var body = table.tBodies[0];
  var rows = Array.prototype.slice.call(body.rows);
  var texts = rows.map(function (r) { return r.textContent.toLowerCase(); });
  var filter = document.getElementById("flip-filter");
  var direction = document.getElementById("flip-direction");
  var count = document.getElementById("flip-count");

  function apply() {
    var q = filter.value.trim().toLowerCase();
    var d = direction.value;
    var shown = 0;
    rows.forEach(function (r, i) {
      var keep = (!q || texts[i].indexOf(q) >= 0) && (!d || r.getAttribute("data-direction") === d);
      r.hidden = !keep;
      if (keep) { shown += 1; }
    });
    count.textContent = shown + " of " + rows.length + " rows";
  }

  function key(row, col, numeric) {
    var cell = row.cells[col];
    var v = cell.hasAttribute("data-value") ? cell.getAttribute("data-value") : cell.textContent.trim();
    return numeric ? parseFloat(v) : v.toLowerCase();
  }

  var heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
  heads.forEach(function (th, col) {
    th.addEventListener("click", function () {
      var asc = th.getAttribute("aria-sort") !== "ascending";
      heads.forEach(function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", asc ? "ascending" : "descending");
      var numeric = th.getAttribute("data-type") === "num";
      rows.slice().sort(function (a, b) {
        var x = key(a, col, numeric), y = key(b, col, numeric);
        return (x < y ? -1 : x > y ? 1 : 0) * (asc ? 1 : -1);
      }).forEach(function (r) { body.appendChild(r); });
    });
  });
  filter.addEventListener("input", apply);
  direction.addEventListener("change", apply);
  apply();
}());
