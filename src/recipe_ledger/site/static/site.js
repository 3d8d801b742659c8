/* Recipe Ledger site: the command builder and the timeline filter.
   Everything is read from precomputed JSON and written with textContent: page text never
   becomes markup, so a planted "<script>" in a recipe or a ledger note stays text. */
(function () {
  "use strict";

  function byId(id) { return document.getElementById(id); }

  function setOptions(select, values, chosen) {
    while (select.firstChild) select.removeChild(select.firstChild);
    values.forEach(function (value) {
      var option = document.createElement("option");
      option.value = value;
      option.textContent = value;
      if (value === chosen) option.selected = true;
      select.appendChild(option);
    });
  }

  function initBuilder() {
    var holder = byId("builder-data");
    if (!holder) return;
    var data = JSON.parse(holder.textContent);
    var hardware = byId("b-hardware"), strategy = byId("b-strategy"), variant = byId("b-variant");
    var boxes = Array.prototype.slice.call(document.querySelectorAll("#b-features input[type=checkbox]"));
    var order = data.features.map(function (f) { return f.name; });

    function chosenFeatures() {
      var on = {};
      boxes.forEach(function (box) { if (box.checked) on[box.value] = true; });
      return order.filter(function (name) { return on[name]; });
    }

    function cliLine(features) {
      var flags = features.length ? features.map(function (f) { return "-f " + f; }).join(" ") : "--no-features";
      return "ledger recipe command " + data.recipe + " -H " + hardware.value + " -s " + strategy.value +
        " -v " + variant.value + " " + flags;
    }

    function show() {
      var features = chosenFeatures();
      var key = [hardware.value, strategy.value, variant.value, features.join(",")].join("|");
      var cell = data.combos[key];
      var out = byId("builder-command"), cli = byId("builder-cli"), warnings = byId("builder-warnings");
      while (warnings.firstChild) warnings.removeChild(warnings.firstChild);
      out.classList.remove("missing", "error");
      if (!strategy.value) {
        out.textContent = "No single-node strategy of this recipe runs on " + hardware.value + ".";
        out.classList.add("missing");
        cli.textContent = "";
        return;
      }
      cli.textContent = cell ? cell.cli : cliLine(features);
      if (!cell) {
        out.textContent = "This combination is not precomputed; run: " + cliLine(features);
        out.classList.add("missing");
      } else if (cell.error) {
        out.textContent = "Does not resolve: " + cell.error;
        out.classList.add("error");
      } else {
        out.textContent = cell.command;
        (cell.warnings || []).forEach(function (text) {
          var item = document.createElement("li");
          item.textContent = "warning: " + text;
          warnings.appendChild(item);
        });
      }
    }

    function onHardware() {
      var info = data.per_hardware[hardware.value];
      setOptions(strategy, info.strategies, info.default_strategy);
      var defaults = info.default_features[variant.value] || [];
      boxes.forEach(function (box) { box.checked = defaults.indexOf(box.value) >= 0; });
      show();
    }

    hardware.addEventListener("change", onHardware);
    variant.addEventListener("change", function () {
      var defaults = data.per_hardware[hardware.value].default_features[variant.value] || [];
      boxes.forEach(function (box) { box.checked = defaults.indexOf(box.value) >= 0; });
      show();
    });
    strategy.addEventListener("change", show);
    boxes.forEach(function (box) { box.addEventListener("change", show); });
    show();
  }

  function initTimeline() {
    var kind = byId("filter-kind"), status = byId("filter-status");
    if (!kind || !status) return;
    var rows = Array.prototype.slice.call(document.querySelectorAll("#timeline tr.entry"));
    var params = new URLSearchParams(window.location.search);
    if (params.get("kind")) kind.value = params.get("kind");
    if (params.get("status")) status.value = params.get("status");

    function apply() {
      var shown = 0;
      rows.forEach(function (row) {
        var keep = (!kind.value || row.getAttribute("data-kind") === kind.value) &&
          (!status.value || row.getAttribute("data-status") === status.value);
        row.classList.toggle("hidden", !keep);
        if (keep) shown += 1;
      });
      byId("filter-count").textContent = shown + " shown";
    }

    kind.addEventListener("change", apply);
    status.addEventListener("change", apply);
    apply();
  }

  document.addEventListener("DOMContentLoaded", function () {
    initBuilder();
    initTimeline();
  });
})();
