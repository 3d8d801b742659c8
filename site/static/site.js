/* Recipe Ledger site: the command builder (its selection kept in the URL), copy buttons, the
   recipe search on the index and the timeline filter.
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

    function texts(indices) { return indices.map(function (i) { return data.texts[i]; }); }

    /* The cURL and `vllm bench serve` lines for the command shown: its served model name (else the
       model it serves, else the recipe's model) and its --port (else vLLM's 8000). */
    function clientLines(lines) {
      var text = lines.join(" ").replace(/\\\s+/g, " ");
      var served = /--served-model-name[ =](\S+)/.exec(text), serve = /\bvllm serve (\S+)/.exec(text);
      var port = /--port[ =](\d+)/.exec(text);
      var section = byId("command");
      var model = served ? served[1] : serve ? serve[1] : (section && section.getAttribute("data-model")) || data.recipe;
      var url = "http://localhost:" + (port ? port[1] : "8000");
      var body = JSON.stringify({ model: model, messages: [{ role: "user", content: "Hello!" }], max_tokens: 64 });
      return {
        curl: "curl " + url + "/v1/chat/completions -H 'Content-Type: application/json' -d '" + body + "'",
        bench: "vllm bench serve --model " + model + " --port " + (port ? port[1] : "8000") +
          " --dataset-name random --random-input-len 1024 --random-output-len 256 --num-prompts 200"
      };
    }

    function showEvidence() {
      document.querySelectorAll("#cell-evidence .cell-evidence-for").forEach(function (block) {
        block.classList.toggle("hidden", block.getAttribute("data-hardware") !== hardware.value);
      });
    }

    function show() {
      var features = chosenFeatures();
      var key = [hardware.value, strategy.value, variant.value, features.join(",")].join("|");
      var cell = data.combos[key];
      var out = byId("builder-command"), cli = byId("builder-cli"), warnings = byId("builder-warnings");
      var curl = byId("builder-curl"), bench = byId("builder-bench");
      while (warnings.firstChild) warnings.removeChild(warnings.firstChild);
      out.classList.remove("missing", "error");
      saveSelection(features);
      showEvidence();
      curl.textContent = "";
      bench.textContent = "";
      if (!strategy.value) {
        out.textContent = "No single-node strategy of this recipe runs on " + hardware.value + ".";
        out.classList.add("missing");
        cli.textContent = "";
        return;
      }
      cli.textContent = cliLine(features);
      if (!cell) {
        out.textContent = "This combination is not precomputed (the recipe has more than " +
          data.all_subsets_up_to + " features); run: " + cliLine(features);
        out.classList.add("missing");
      } else if (cell.error) {
        out.textContent = "This combination does not resolve: " + texts(cell.error)[0];
        out.classList.add("error");
      } else {
        out.textContent = texts(cell.lines).join("\n");
        var lines = clientLines(texts(cell.lines));
        curl.textContent = lines.curl;
        bench.textContent = lines.bench;
        texts(cell.warnings).forEach(function (text) {
          var item = document.createElement("li");
          item.textContent = "warning: " + text;
          warnings.appendChild(item);
        });
      }
    }

    /* The selection in the URL (?hardware=&strategy=&variant=&features=a,b or none), so that a
       link opens the same command. replaceState: choosing does not fill the history. */
    function saveSelection(features) {
      var params = new URLSearchParams();
      params.set("hardware", hardware.value);
      params.set("strategy", strategy.value);
      params.set("variant", variant.value);
      params.set("features", features.length ? features.join(",") : "none");
      history.replaceState(null, "", "?" + params.toString() + window.location.hash);
    }

    function loadSelection() {
      var params = new URLSearchParams(window.location.search);
      if (params.get("hardware") && data.per_hardware[params.get("hardware")]) {
        hardware.value = params.get("hardware");
        onHardware();
      }
      if (params.get("variant") && data.variants.indexOf(params.get("variant")) >= 0) variant.value = params.get("variant");
      var info = data.per_hardware[hardware.value];
      if (params.get("strategy") && info.strategies.indexOf(params.get("strategy")) >= 0) strategy.value = params.get("strategy");
      if (params.get("features")) {
        var wanted = params.get("features") === "none" ? [] : params.get("features").split(",");
        boxes.forEach(function (box) { box.checked = wanted.indexOf(box.value) >= 0; });
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
    loadSelection();
    show();
  }

  /* A copy button on every command block: copies the block's text, says so for a moment. */
  function initCopyButtons() {
    document.querySelectorAll("pre.command, code.copyable").forEach(function (block) {
      var button = document.createElement("button");
      button.type = "button";
      button.className = "copy";
      button.textContent = "Copy";
      button.setAttribute("aria-label", "Copy the command");
      button.addEventListener("click", function () {
        var done = function () {
          button.textContent = "Copied";
          setTimeout(function () { button.textContent = "Copy"; }, 1500);
        };
        if (navigator.clipboard && window.isSecureContext) {
          navigator.clipboard.writeText(block.textContent).then(done, function () { button.textContent = "Select and copy"; });
        } else {
          var range = document.createRange();
          range.selectNodeContents(block);
          var selection = window.getSelection();
          selection.removeAllRanges();
          selection.addRange(range);
          try { document.execCommand("copy"); done(); } catch (e) { button.textContent = "Press Ctrl+C"; }
        }
      });
      var wrap = document.createElement("div");
      wrap.className = "copy-wrap";
      block.parentNode.insertBefore(wrap, block);
      wrap.appendChild(block);
      wrap.appendChild(button);
    });
  }

  /* The index's recipe search: hides the matrix rows (and cards) whose text lacks every word typed. */
  function initRecipeSearch() {
    var box = byId("recipe-search"), only = byId("recipe-measured");
    if (!box) return;
    var rows = Array.prototype.slice.call(document.querySelectorAll("#matrix tr.recipe-row"));
    var params = new URLSearchParams(window.location.search);
    if (params.get("q")) box.value = params.get("q");

    function apply() {
      var words = box.value.toLowerCase().split(/\s+/).filter(Boolean), shown = 0;
      rows.forEach(function (row) {
        var text = row.getAttribute("data-search");
        var keep = words.every(function (w) { return text.indexOf(w) >= 0; }) &&
          (!only || !only.checked || row.getAttribute("data-measured") === "yes");
        row.classList.toggle("hidden", !keep);
        if (keep) shown += 1;
      });
      byId("recipe-count").textContent = shown + " of " + rows.length + " recipes";
    }

    box.addEventListener("input", apply);
    if (only) only.addEventListener("change", apply);
    apply();
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

  /* Data tables reflow on a phone (site.css: each row a card): each cell is labelled with its
     column's header here, so the CSS can print the label above the value. */
  function initReflow() {
    document.querySelectorAll("table.data").forEach(function (table) {
      if (table.classList.contains("timeline")) return;
      var heads = Array.prototype.map.call(table.querySelectorAll("thead tr:first-child th"), function (th) {
        return th.textContent.trim();
      });
      table.classList.add("reflow");
      if (!heads.length) return;
      table.querySelectorAll("tbody tr").forEach(function (row) {
        var column = 0;
        Array.prototype.forEach.call(row.children, function (cell) {
          if (heads[column]) cell.setAttribute("data-label", heads[column]);
          column += cell.colSpan || 1;
        });
      });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    initReflow();
    initBuilder();
    initTimeline();
    initRecipeSearch();
    initCopyButtons();
  });
})();
