/* hammr trace and results viewer: vanilla JS, no build step, nothing external.
 * Served by `hammr view` (data from /api/...) or embedded by `hammr report RUN --html`
 * (data from <script type="application/json" id="hammr-data">, filtered client side). */
(function () {
  "use strict";

  var PAGE = 50;
  var ERROR_KINDS = [
    "syntax", "no_action", "unknown_tool", "unknown_variable", "bad_arguments",
    "capability_missing", "tool_failure", "llm_failure", "timeout", "error",
  ];
  var PALETTE = ["#e6194b", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#17becf",
    "#d62728", "#8c564b", "#e377c2", "#bcbd22"];

  // -- data ------------------------------------------------------------------------------

  var STATIC = null;
  (function () {
    var el = document.getElementById("hammr-data");
    if (el) {
      try { STATIC = JSON.parse(el.textContent); } catch (e) { STATIC = null; }
    }
  })();

  function apiBase() {
    // The page may be served at / or under a prefix; api/ sits beside index.html.
    var p = window.location.pathname;
    return p.slice(0, p.lastIndexOf("/") + 1) + "api/";
  }

  function qs(params) {
    var parts = [];
    Object.keys(params || {}).forEach(function (k) {
      var v = params[k];
      if (v === undefined || v === null || v === "") return;
      parts.push(encodeURIComponent(k) + "=" + encodeURIComponent(v));
    });
    return parts.length ? "?" + parts.join("&") : "";
  }

  function fetchJSON(path, params) {
    return fetch(apiBase() + path + qs(params)).then(function (r) {
      if (!r.ok) {
        return r.text().then(function (t) {
          var msg = t;
          try { msg = JSON.parse(t).error || t; } catch (e) { /* plain text */ }
          throw new Error(r.status + " " + msg);
        });
      }
      return r.json();
    });
  }

  // A name is ONE path segment: a '/' in a run or sample name is sent as %2F.
  function enc(s) { return encodeURIComponent(String(s)); }
  function dec(s) { try { return decodeURIComponent(s); } catch (e) { return s; } }

  /** The URL as a link target when its scheme is http or https, else null (shown as text). */
  function webHref(url) {
    if (typeof url !== "string" || !url) return null;
    try {
      var u = new URL(url);
      return u.protocol === "http:" || u.protocol === "https:" ? u.href : null;
    } catch (e) { return null; }
  }

  function isCorrect(score) { return typeof score === "number" && score >= 1 - 1e-9; }  // as the store: right = score 1

  /** Whether a sample has a ground truth to be scored against: one from `hammr ask` has
   * none, and its stored score (0) means nothing. */
  function hasTruth(rec) {
    var a = rec ? rec.answers : null;
    if (Array.isArray(a)) return a.some(function (x) { return x !== null && x !== undefined && String(x) !== ""; });
    return a !== null && a !== undefined && String(a) !== "";
  }
  var NO_TRUTH = "no ground truth";
  var FAILED = "FAILED";  // a run whose numbers are not results (hammr.eval.run_health)

  function traceErrorKinds(trace, out) {
    out = out || [];
    if (!trace) return out;
    (trace.steps || []).forEach(function (s) {
      if (s.error_kind && out.indexOf(s.error_kind) < 0) out.push(s.error_kind);
      if (s.child) traceErrorKinds(s.child, out);
    });
    return out;
  }

  function traceAgents(trace, out) {
    out = out || [];
    if (!trace) return out;
    if (trace.agent && out.indexOf(trace.agent) < 0) out.push(trace.agent);
    (trace.steps || []).forEach(function (s) { if (s.child) traceAgents(s.child, out); });
    return out;
  }

  /** Items retrieved from memory over a whole trace (hits, reflections, rules, ...). */
  function retrievedTotal(trace) {
    var c = retrievedCounts(trace), n = 0;
    Object.keys(c.items).forEach(function (k) { n += c.items[k]; });
    return n;
  }

  function calledAgent(rec) {
    if (rec.agent) return rec.agent;
    var agents = traceAgents(rec.trace);
    return agents.length > 1 ? agents[1] : (agents[0] || "");
  }

  function summary(rec) {
    return {
      dataset: rec.dataset, sample_id: rec.sample_id, question_type: rec.question_type,
      question: rec.question, answers: rec.answers, prediction: rec.prediction,
      score: rec.score, status: rec.status, agent: calledAgent(rec),
      error_kinds: rec.error_kinds || traceErrorKinds(rec.trace),
      latency_s: rec.latency_s, prompt_tokens: rec.prompt_tokens, llm_calls: rec.llm_calls,
      retrieved: rec.retrieved !== undefined ? rec.retrieved : retrievedTotal(rec.trace),
    };
  }

  var api = {
    runs: function () {
      if (STATIC) return Promise.resolve({ runs: STATIC.runs || [] });
      return fetchJSON("runs");
    },
    samples: function (run, f) {
      if (!STATIC) return fetchJSON("runs/" + enc(run) + "/samples", f);
      var all = ((STATIC.samples || {})[run] || []);
      var items = all.filter(function (rec) {
        if (f.dataset && rec.dataset !== f.dataset) return false;
        if (f.question_type && rec.question_type !== f.question_type) return false;
        if (f.correct === "true" && !isCorrect(rec.score)) return false;
        if (f.correct === "false" && isCorrect(rec.score)) return false;
        if (f.error_kind) {
          var kinds = rec.error_kinds || traceErrorKinds(rec.trace);
          if (kinds.indexOf(f.error_kind) < 0) return false;
        }
        if (f.agent && traceAgents(rec.trace).indexOf(f.agent) < 0 && rec.agent !== f.agent) {
          return false;
        }
        return true;
      });
      var offset = +f.offset || 0, limit = +f.limit || PAGE;
      return Promise.resolve({
        total: items.length, offset: offset, limit: limit,
        items: items.slice(offset, offset + limit).map(summary),
      });
    },
    sample: function (run, dataset, id) {
      if (!STATIC) return fetchJSON("runs/" + enc(run) + "/samples/" + enc(dataset) + "/" + enc(id));
      var rec = ((STATIC.samples || {})[run] || []).filter(function (r) {
        return r.dataset === dataset && String(r.sample_id) === String(id);
      })[0];
      return rec ? Promise.resolve(rec) : Promise.reject(new Error("404 no such sample"));
    },
    compare: function (a, b, f) {
      if (!STATIC) return fetchJSON("compare/" + enc(a) + "/" + enc(b), f);
      var sa = (STATIC.samples || {})[a], sb = (STATIC.samples || {})[b];
      if (!sa || !sb) return Promise.reject(new Error("this report does not hold both runs"));
      var keyed = {}, order = [];
      function put(rec, side) {
        var k = rec.dataset + "\u0000" + rec.sample_id;
        if (!keyed[k]) {
          keyed[k] = { dataset: rec.dataset, sample_id: rec.sample_id, question_type: rec.question_type,
            question: rec.question, answers: rec.answers, a: null, b: null };
          order.push(k);
        }
        keyed[k][side] = { prediction: rec.prediction, score: rec.score, status: rec.status };
      }
      sa.forEach(function (r) { put(r, "a"); });
      sb.forEach(function (r) { put(r, "b"); });
      var items = order.map(function (k) { return keyed[k]; }).filter(function (it) {
        return f.only === "all" || !it.a || !it.b || it.a.score !== it.b.score || it.a.prediction !== it.b.prediction;
      });
      var off = +f.offset || 0, lim = +f.limit || PAGE;
      return Promise.resolve({ total: items.length, offset: off, limit: lim, items: items.slice(off, off + lim) });
    },
  };

  function imageURL(hash) {
    if (STATIC) return (STATIC.images || {})[hash] || "";
    return apiBase() + "images/" + enc(hash);
  }

  // -- DOM helpers -----------------------------------------------------------------------

  var SVGNS = "http://www.w3.org/2000/svg";

  function h(tag, attrs) {
    var el = document.createElement(tag);
    setAttrs(el, attrs);
    for (var i = 2; i < arguments.length; i++) add(el, arguments[i]);
    return el;
  }

  function s(tag, attrs) {
    var el = document.createElementNS(SVGNS, tag);
    setAttrs(el, attrs);
    for (var i = 2; i < arguments.length; i++) add(el, arguments[i]);
    return el;
  }

  function setAttrs(el, attrs) {
    Object.keys(attrs || {}).forEach(function (k) {
      var v = attrs[k];
      if (v === undefined || v === null || v === false) return;
      if (k === "on") {
        Object.keys(v).forEach(function (ev) { el.addEventListener(ev, v[ev]); });
      } else if (k === "text") {
        el.textContent = v;
      } else {
        el.setAttribute(k, v === true ? "" : v);
      }
    });
  }

  function add(el, child) {
    if (child === undefined || child === null || child === false) return;
    if (Array.isArray(child)) { child.forEach(function (c) { add(el, c); }); return; }
    el.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
  }

  function pct(x) { return typeof x === "number" ? (100 * x).toFixed(1) : "–"; }
  function num(x, d) { return typeof x === "number" ? x.toFixed(d === undefined ? 2 : d) : "–"; }
  function secs(x) {
    if (typeof x !== "number") return "–";
    return x < 1 ? Math.round(x * 1000) + " ms" : x.toFixed(2) + " s";
  }
  function answersText(a) {
    if (Array.isArray(a)) {
      var counts = {};
      a.forEach(function (x) { counts[x] = (counts[x] || 0) + 1; });
      return Object.keys(counts).map(function (k) {
        return counts[k] > 1 ? k + " ×" + counts[k] : k;
      }).join(", ");
    }
    return a === undefined || a === null ? "" : String(a);
  }
  function truncate(t, n) { t = t == null ? "" : String(t); return t.length > n ? t.slice(0, n - 1) + "…" : t; }

  function scoreBadge(score, truth) {
    if (truth === false) return h("span", { class: "badge muted no-truth", title: "nothing to score the prediction against" }, NO_TRUTH);
    if (typeof score !== "number") return h("span", { class: "badge muted" }, "–");
    return h("span", { class: "badge score " + (isCorrect(score) ? "right" : "wrong") }, num(score));
  }

  function failedTitle(run) {
    var v = run && run.verdict;
    return v ? "not a result: " + v.text + (v.advice ? "; " + v.advice + ", then ask them again with --retry-failed" : "") : null;
  }

  function failedCell(run, extra) {
    return h("td", { class: "num bad failed" + (extra ? " " + extra : ""), title: failedTitle(run) }, FAILED);
  }

  function cell(c) {
    if (!c || typeof c.mean !== "number") return h("td", { class: "num muted" }, "–");
    var half = (typeof c.high === "number" && typeof c.low === "number") ? (c.high - c.low) / 2 : null;
    return h("td", { class: "num", title: c.n !== undefined ? "n = " + c.n : null },
      pct(c.mean), half !== null ? h("span", { class: "ci" }, " ±" + pct(half)) : null);
  }

  function setCrumbs(parts) {
    var nav = document.getElementById("crumbs");
    nav.textContent = "";
    parts.forEach(function (p, i) {
      if (i) add(nav, h("span", { class: "sep" }, "›"));
      add(nav, p.href ? h("a", { href: p.href }, p.text) : h("span", {}, p.text));
    });
  }

  function errorBox(err) {
    return h("div", { class: "error-box" }, String(err && err.message ? err.message : err));
  }

  // -- routing ---------------------------------------------------------------------------

  function parseHash() {
    var raw = window.location.hash.replace(/^#\/?/, "");
    var q = "", i = raw.indexOf("?");
    if (i >= 0) { q = raw.slice(i + 1); raw = raw.slice(0, i); }
    var parts = raw ? raw.split("/").map(dec) : [];
    var params = {};
    q.split("&").forEach(function (kv) {
      if (!kv) return;
      var j = kv.indexOf("=");
      var k = dec(j < 0 ? kv : kv.slice(0, j));
      params[k] = j < 0 ? "" : dec(kv.slice(j + 1).replace(/\+/g, " "));
    });
    return { parts: parts, params: params };
  }

  var renderToken = 0;

  function route() {
    var r = parseHash(), p = r.parts, app = document.getElementById("app");
    var token = ++renderToken;
    function show(promise) {
      app.classList.add("loading");
      promise.then(function (node) {
        if (token !== renderToken) return;
        app.textContent = "";
        add(app, node);
      }).catch(function (err) {
        if (token !== renderToken) return;
        app.textContent = "";
        add(app, errorBox(err));
      }).then(function () { app.classList.remove("loading"); });
    }
    if (p[0] === "run" && p.length >= 5 && p[2] === "sample") {
      show(viewSample(p[1], p[3], p.slice(4).join("/")).then(function (node) {
        setTimeout(function () { if (token === renderToken) focusStep(r.params); }, 0);
        return node;
      }));
    } else if (p[0] === "run" && p[1]) {
      show(viewRun(p[1], r.params));
    } else if (p[0] === "compare" && p[1] && p[2]) {
      show(viewCompare(p[1], p[2], r.params));
    } else {
      show(viewRuns());
    }
  }

  // -- view 1: runs ------------------------------------------------------------------------

  function viewRuns() {
    setCrumbs([{ text: "Runs" }]);
    return api.runs().then(function (data) {
      var runs = data.runs || [];
      if (!runs.length) return h("p", { class: "muted" }, "No runs in the store yet. Start one with `hammr eval`.");
      var cols = [], seen = {};
      runs.forEach(function (run) {
        if (run.ground_truth === false) return;  // its groups were never scored
        (run.rows || []).forEach(function (row) {
          var k = row.question_type + "\u0000" + row.dataset;
          if (!seen[k]) { seen[k] = 1; cols.push({ key: k, qt: row.question_type, ds: row.dataset }); }
        });
      });
      var pick = { a: runs[0] ? runs[0].name : "", b: runs[1] ? runs[1].name : "" };
      var head = h("tr", {},
        h("th", { class: "pick", title: "run A" }, "A"), h("th", { class: "pick", title: "run B" }, "B"),
        h("th", {}, "Run"), h("th", {}, "System"), h("th", {}, "Suite"),
        h("th", { class: "num" }, "Done"), h("th", { class: "num" }, "Failed"),
        cols.map(function (c) {
          return h("th", { class: "num" }, h("div", { class: "qt" }, c.qt), h("div", { class: "ds" }, c.ds));
        }),
        h("th", { class: "num macro" }, "Macro avg"), h("th", {}, "Created"));
      var body = runs.map(function (run) {
        var byKey = {};
        (run.rows || []).forEach(function (row) { byKey[row.question_type + "\u0000" + row.dataset] = row; });
        function radio(side) {
          return h("td", { class: "pick" }, h("input", {
            type: "radio", name: "pick-" + side, value: run.name, checked: pick[side] === run.name,
            "aria-label": "compare as " + side.toUpperCase(),
            on: { change: function () { pick[side] = run.name; updateCompare(); } },
          }));
        }
        return h("tr", { class: "run-row", "data-run": run.name },
          radio("a"), radio("b"),
          h("td", {}, h("a", { class: "run-link", href: "#/run/" + enc(run.name) }, run.name)),
          h("td", {}, run.system || ""), h("td", {}, run.suite || ""),
          h("td", { class: "num" }, run.done === undefined ? "" : run.done),
          h("td", { class: "num" + (run.failed ? " bad" : "") }, run.failed === undefined ? "" : run.failed),
          cols.map(function (c) {
            if (run.ground_truth === false) return h("td", { class: "num muted" }, "–");
            return run.verdict && byKey[c.key] ? failedCell(run) : cell(byKey[c.key]);
          }),
          run.ground_truth === false
            ? h("td", { class: "num macro muted no-truth", title: "its samples have no ground truth: nothing was scored" }, NO_TRUTH)
            : run.verdict ? failedCell(run, "macro")
            : (function () { var td = cell(run.macro); td.classList.add("macro"); return td; })(),
          h("td", { class: "muted small" }, run.created ? String(run.created).replace("T", " ").slice(0, 19) : ""));
      });
      var btn = h("button", { id: "compare-btn", type: "button" }, "Compare A vs B");
      function updateCompare() {
        btn.disabled = !(pick.a && pick.b && pick.a !== pick.b);
      }
      btn.addEventListener("click", function () {
        window.location.hash = "#/compare/" + enc(pick.a) + "/" + enc(pick.b);
      });
      updateCompare();
      return [
        h("div", { class: "toolbar" }, h("h1", {}, "Runs"), h("span", { class: "grow" }),
          STATIC ? h("span", { class: "muted small" }, "static report") : null, btn),
        h("div", { class: "table-wrap" }, h("table", { class: "grid runs" }, h("thead", {}, head), h("tbody", {}, body))),
        h("p", { class: "muted small" }, "Scores in %, mean ± half the 95% bootstrap interval; the macro average weighs every dataset equally."),
      ];
    });
  }

  // -- view 2: one run's samples -------------------------------------------------------------

  var FILTERS = [
    { id: "filter-dataset", key: "dataset" },
    { id: "filter-type", key: "question_type" },
    { id: "filter-correct", key: "correct" },
    { id: "filter-error", key: "error_kind" },
    { id: "filter-agent", key: "agent" },
  ];

  function runHash(run, params) {
    return "#/run/" + enc(run) + qs(params);
  }

  function viewRun(run, params) {
    setCrumbs([{ text: "Runs", href: "#/" }, { text: run }]);
    var f = {};
    FILTERS.forEach(function (x) { if (params[x.key]) f[x.key] = params[x.key]; });
    var offset = Math.max(0, parseInt(params.offset || "0", 10) || 0);
    return Promise.all([
      api.runs().catch(function () { return { runs: [] }; }),
      api.samples(run, Object.assign({ offset: offset, limit: PAGE }, f)),
    ]).then(function (res) {
      var info = (res[0].runs || []).filter(function (r) { return r.name === run; })[0] || {};
      var page = res[1];
      var datasets = [], types = [];
      (info.rows || []).forEach(function (row) {
        if (datasets.indexOf(row.dataset) < 0) datasets.push(row.dataset);
        if (types.indexOf(row.question_type) < 0) types.push(row.question_type);
      });
      [f.dataset].forEach(function (d) { if (d && datasets.indexOf(d) < 0) datasets.push(d); });
      [f.question_type].forEach(function (t) { if (t && types.indexOf(t) < 0) types.push(t); });
      var agents = [], kinds = ERROR_KINDS.slice();
      (page.items || []).forEach(function (it) {
        if (it.agent && agents.indexOf(it.agent) < 0) agents.push(it.agent);
        (it.error_kinds || []).forEach(function (k) { if (kinds.indexOf(k) < 0) kinds.push(k); });
      });

      function go(change) {
        var next = Object.assign({}, f, change);
        Object.keys(next).forEach(function (k) { if (!next[k]) delete next[k]; });
        window.location.hash = runHash(run, next);
      }
      function select(id, key, label, options) {
        var el = h("select", { id: id, name: key, on: { change: function () { var c = {}; c[key] = el.value; c.offset = 0; go(c); } } },
          options.map(function (o) {
            var v = Array.isArray(o) ? o[0] : o, t = Array.isArray(o) ? o[1] : o;
            return h("option", { value: v, selected: (f[key] || "") === v }, t);
          }));
        return h("label", { class: "filter" }, h("span", {}, label), el);
      }
      function input(id, key, label, list) {
        var dl = id + "-list";
        var el = h("input", { id: id, name: key, type: "search", list: dl, value: f[key] || "", placeholder: "any",
          on: { change: function () { var c = {}; c[key] = el.value.trim(); c.offset = 0; go(c); } } });
        return h("label", { class: "filter" }, h("span", {}, label), el,
          h("datalist", { id: dl }, list.map(function (x) { return h("option", { value: x }); })));
      }
      var bar = h("div", { class: "filters" },
        select("filter-dataset", "dataset", "Dataset", [["", "all"]].concat(datasets)),
        select("filter-type", "question_type", "Question type", [["", "all"]].concat(types)),
        select("filter-correct", "correct", "Answer", [["", "all"], ["true", "right"], ["false", "wrong"]]),
        input("filter-error", "error_kind", "Error kind", kinds),
        input("filter-agent", "agent", "Agent called", agents),
        Object.keys(f).length ? h("a", { class: "clear", href: runHash(run, {}) }, "clear filters") : null);

      var rows = (page.items || []).map(function (it) {
        var href = "#/run/" + enc(run) + "/sample/" + enc(it.dataset) + "/" + enc(it.sample_id);
        return h("tr", { class: "sample-row clickable", "data-dataset": it.dataset, "data-id": it.sample_id,
          on: { click: function (ev) { if (ev.target.tagName !== "A") window.location.hash = href; } } },
          h("td", {}, h("a", { href: href }, it.sample_id)),
          h("td", { class: "small" }, it.dataset, h("div", { class: "muted" }, it.question_type)),
          h("td", { class: "question", title: it.question }, truncate(it.question, 110)),
          h("td", { class: "pred" }, truncate(it.prediction == null ? "" : it.prediction, 40)),
          h("td", { class: "gt", title: answersText(it.answers) }, hasTruth(it) ? truncate(answersText(it.answers), 40) : h("span", { class: "muted" }, "—")),
          h("td", { class: "num" }, scoreBadge(it.score, hasTruth(it))),
          h("td", { class: "small mono" }, it.agent || "",
            it.retrieved ? h("div", {}, h("span", { class: "badge memory", title: "items retrieved from memory over the run" }, "memory " + it.retrieved)) : null),
          h("td", { class: "small" }, (it.error_kinds || []).map(function (k) { return h("span", { class: "badge err" }, k); }),
            it.status && it.status !== "finished" && it.status !== "ok" ? h("span", { class: "badge warn" }, it.status) : null),
          h("td", { class: "num small" }, secs(it.latency_s)),
          h("td", { class: "num small" }, it.prompt_tokens == null ? "–" : it.prompt_tokens,
            it.llm_calls != null ? h("div", { class: "muted" }, it.llm_calls + " calls") : null));
      });
      var total = page.total || 0;
      var first = total ? offset + 1 : 0, last = Math.min(offset + PAGE, total);
      var pager = h("div", { class: "pager" },
        h("button", { id: "page-prev", type: "button", disabled: offset <= 0,
          on: { click: function () { go({ offset: Math.max(0, offset - PAGE) || "" }); } } }, "‹ Prev"),
        h("span", { id: "page-info" }, first + "–" + last + " of " + total),
        h("button", { id: "page-next", type: "button", disabled: offset + PAGE >= total,
          on: { click: function () { go({ offset: offset + PAGE }); } } }, "Next ›"));
      var stats = h("div", { class: "run-stats" },
        info.system ? h("span", {}, "system ", h("b", {}, info.system)) : null,
        info.suite ? h("span", {}, "suite ", h("b", {}, info.suite)) : null,
        info.ground_truth === false ? h("span", { class: "no-truth" }, NO_TRUTH)
          : info.verdict ? h("span", { class: "bad failed", title: failedTitle(info) }, h("b", {}, FAILED))
          : info.macro ? h("span", {}, "macro ", h("b", {}, pct(info.macro.mean) + "%")) : null,
        info.done !== undefined ? h("span", {}, "done ", h("b", {}, info.done)) : null,
        info.failed ? h("span", { class: "bad" }, "failed ", h("b", {}, info.failed)) : null);
      return [
        h("div", { class: "toolbar" }, h("h1", {}, run), stats),
        info.verdict ? h("div", { class: "error-box run-failed" }, FAILED + ": its numbers are not results: " + info.verdict.text +
          (info.verdict.advice ? "; " + info.verdict.advice + ", then ask them again with --retry-failed" : "; ask them again with --retry-failed")) : null,
        bar,
        h("div", { class: "table-wrap" }, h("table", { class: "grid samples", id: "samples" },
          h("thead", {}, h("tr", {}, ["Id", "Dataset", "Question", "Prediction", "Ground truth", "Score", "Agent", "Errors", "Latency", "Tokens"]
            .map(function (t, i) { return h("th", { class: i >= 8 || i === 5 ? "num" : null }, t); }))),
          h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", { colspan: 10, class: "muted empty" }, "No samples match these filters."))))),
        pager,
      ];
    });
  }

  // -- values, images and boxes -----------------------------------------------------------

  function isImage(v) { return v && typeof v === "object" && !Array.isArray(v) && typeof v.$image === "string"; }
  function isBox(v) { return v && typeof v === "object" && !Array.isArray(v) && Array.isArray(v.$box); }
  function isPage(v) { return v && typeof v === "object" && !Array.isArray(v) && typeof v.$page === "string"; }

  function walkValues(v, fn) {
    if (Array.isArray(v)) { v.forEach(function (x) { walkValues(x, fn); }); return; }
    if (v && typeof v === "object") {
      fn(v);
      if (!isImage(v) && !isBox(v)) Object.keys(v).forEach(function (k) { walkValues(v[k], fn); });
    }
  }

  /** A point value: [x, y], two finite numbers (a tuple in the trace's JSON). */
  function isPoint(v) {
    return Array.isArray(v) && v.length === 2 && v.every(function (x) { return typeof x === "number" && isFinite(x); });
  }

  function pointText(p) {
    function n(x) { return String(Math.round(x * 100) / 100); }
    return "(" + n(p[0]) + ", " + n(p[1]) + ")";
  }

  /** Everything a sample's images need: the root image, every box and crop region, and the
   * question's point (the `point` input, in the root image's pixels). */
  function collectGeometry(trace) {
    var geo = { root: null, boxes: [], regions: [], point: null }, seenBox = {}, seenReg = {};
    if (trace && trace.inputs && isPoint(trace.inputs.point)) geo.point = trace.inputs.point;
    function visitValue(v) {
      walkValues(v, function (x) {
        if (isImage(x)) {
          if (!x.region && !geo.root) geo.root = x;
          if (Array.isArray(x.region)) {
            var rk = x.region.join(",");
            if (!seenReg[rk]) { seenReg[rk] = 1; geo.regions.push({ xywh: x.region, label: "crop" + (x.zoom && x.zoom !== 1 ? " ×" + (+x.zoom).toFixed(1) : "") }); }
          }
        } else if (isBox(x)) {
          var k = x.$box.join(",") + "|" + (x.label || "");
          if (!seenBox[k]) { seenBox[k] = 1; geo.boxes.push(x); }
        }
      });
    }
    function visitTrace(t) {
      if (!t) return;
      visitValue(t.inputs);
      (t.steps || []).forEach(function (st) {
        visitValue(st.arguments);
        visitValue(st.output);
        visitTrace(st.child);
      });
    }
    visitTrace(trace);
    return geo;
  }

  function colorFor(label) {
    var t = String(label || ""), x = 0;
    for (var i = 0; i < t.length; i++) x = (x * 31 + t.charCodeAt(i)) >>> 0;
    return PALETTE[x % PALETTE.length];
  }

  function boxLabel(b) {
    var t = b.label || "box";
    if (typeof b.score === "number") t += " " + b.score.toFixed(2);
    return t;
  }

  /** An image with an SVG overlay in the image's own pixel space (scales with the image). */
  function overlayFigure(img, shapes, opts) {
    opts = opts || {};
    var w = (img.size && img.size[0]) || 100, hgt = (img.size && img.size[1]) || 100;
    var dispW = opts.width || Math.max(180, Math.min(360, w));
    var svg = s("svg", { class: "overlay", viewBox: "0 0 " + w + " " + hgt, preserveAspectRatio: "none" });
    var fs = Math.max(w, hgt) * (opts.small ? 0.09 : 0.06);
    shapes.forEach(function (sh) {
      var x = sh.xywh[0], y = sh.xywh[1], bw = sh.xywh[2], bh = sh.xywh[3];
      var color = sh.region ? "#ffb000" : colorFor(sh.label);
      var g = s("g", { class: sh.region ? "shape region" : "shape" });
      g.appendChild(s("rect", { class: sh.region ? "box region" : "box", x: x, y: y, width: bw, height: bh,
        stroke: color, "data-label": sh.label || "" }, s("title", { text: sh.label || "" })));
      if (sh.label && !opts.nolabels) {
        var tw = fs * 0.6 * sh.label.length + fs * 0.5;
        var ty = y - fs * 1.15 >= 0 ? y - fs * 1.15 : y;
        g.appendChild(s("rect", { class: "label-bg", x: x, y: ty, width: tw, height: fs * 1.15, fill: color }));
        g.appendChild(s("text", { class: "label", x: x + fs * 0.25, y: ty + fs * 0.9, "font-size": fs }, sh.label));
      }
      svg.appendChild(g);
    });
    if (opts.point && isPoint(opts.point)) svg.appendChild(pointMarker(opts.point, w, hgt, opts.small));
    var src = imageURL(img.$image);
    var wrap = h("div", { class: "imgwrap", style: "width:" + dispW + "px" },
      src ? h("img", { src: src, alt: opts.alt || "image", width: dispW, loading: "lazy", class: w < 120 ? "pixelated" : null })
        : h("div", { class: "noimg", style: "aspect-ratio:" + w + "/" + hgt }, "image not stored"),
      svg);
    return h("figure", { class: "figure" + (opts.small ? " small" : "") }, wrap,
      opts.caption ? h("figcaption", {}, opts.caption) : null);
  }

  /** The question's point: a ring with a dot and four ticks, in the image's pixel space (its
   * strokes keep their width whatever the image's display size). */
  function pointMarker(p, w, hgt, small) {
    var r = Math.max(3, Math.max(w, hgt) * (small ? 0.05 : 0.035)), x = p[0], y = p[1];
    var g = s("g", { class: "point-marker", "data-x": x, "data-y": y },
      s("title", { text: "the question's point " + pointText(p) }),
      s("circle", { class: "point-ring", cx: x, cy: y, r: r }),
      s("circle", { class: "point-ring inner", cx: x, cy: y, r: r }),
      s("circle", { class: "point-dot", cx: x, cy: y, r: Math.max(1, r * 0.22) }));
    [[-1, 0], [1, 0], [0, -1], [0, 1]].forEach(function (d) {
      g.appendChild(s("line", { class: "point-tick", x1: x + d[0] * r * 1.25, y1: y + d[1] * r * 1.25,
        x2: x + d[0] * r * 2, y2: y + d[1] * r * 2 }));
    });
    return g;
  }

  /** The point in a crop's own pixels, when it falls inside the crop's region. */
  function pointInCrop(p, img) {
    var r = img.region;
    if (!p || !Array.isArray(r) || !img.size) return null;
    if (p[0] < r[0] || p[0] > r[0] + r[2] || p[1] < r[1] || p[1] > r[1] + r[3]) return null;
    return [(p[0] - r[0]) * img.size[0] / r[2], (p[1] - r[1]) * img.size[1] / r[3]];
  }

  function rootShapes(geo, boxes, withRegions) {
    var out = (boxes || geo.boxes).map(function (b) { return { xywh: b.$box, label: boxLabel(b) }; });
    if (withRegions) geo.regions.forEach(function (r) { out.push({ xywh: r.xywh, label: r.label, region: true }); });
    return out;
  }

  function isRootLike(img, geo) {
    return !img.region && geo.root && img.size && geo.root.size &&
      img.size[0] === geo.root.size[0] && img.size[1] === geo.root.size[1];
  }

  function renderImage(img, geo, caption) {
    var size = img.size ? img.size[0] + "×" + img.size[1] : "";
    if (Array.isArray(img.region)) {
      // a crop: itself with the boxes that fall in it, and its place on the root image
      var r = img.region, sx = img.size[0] / r[2], sy = img.size[1] / r[3];
      var inside = geo.boxes.filter(function (b) {
        var x = b.$box;
        if (x.join(",") === r.join(",")) return false;  // the box it was cropped to
        return x[0] < r[0] + r[2] && x[0] + x[2] > r[0] && x[1] < r[1] + r[3] && x[1] + x[3] > r[1];
      }).map(function (b) {
        var x = b.$box;
        return { xywh: [(x[0] - r[0]) * sx, (x[1] - r[1]) * sy, x[2] * sx, x[3] * sy], label: boxLabel(b) };
      });
      var parts = [overlayFigure(img, inside, { point: pointInCrop(geo.point, img), caption: (caption ? caption + " · " : "") + "crop " + size +
        " of region [" + r.map(function (v) { return Math.round(v); }).join(", ") + "]" })];
      if (geo.root) {
        parts.push(overlayFigure(geo.root, [{ xywh: r, label: "crop", region: true }],
          { small: true, width: 150, point: geo.point, caption: "its place in the original" }));
      }
      return h("div", { class: "figrow" }, parts);
    }
    if (isRootLike(img, geo)) {
      // full size once (the sample's inputs); a thumbnail wherever it is passed on
      var first = !geo.shownRoot;
      geo.shownRoot = true;
      return overlayFigure(img, rootShapes(geo, null, true), {
        small: !first, width: first ? null : 140, point: geo.point,
        caption: first ? (caption ? caption + " · " : "") + size +
          (geo.point ? " · point " + pointText(geo.point) + " marked" : "") +
          (geo.boxes.length ? " · " + geo.boxes.length + " box(es) found in the trace" : "") +
          (geo.regions.length ? " · " + geo.regions.length + " crop(s)" : "") : "the original " + size,
      });
    }
    return overlayFigure(img, [], { caption: (caption ? caption + " · " : "") + size });
  }

  function renderBoxes(boxes, geo) {
    var list = h("ul", { class: "boxlist mono" }, boxes.map(function (b) {
      return h("li", {}, h("span", { class: "swatch", style: "background:" + colorFor(boxLabel(b)) }),
        boxLabel(b) + " [" + b.$box.map(function (v) { return Math.round(v); }).join(", ") + "]");
    }));
    if (!geo.root) return list;
    return h("div", { class: "figrow" },
      overlayFigure(geo.root, rootShapes(geo, boxes, false), { width: 220, point: geo.point, caption: boxes.length + " box(es) on the original" }),
      list);
  }

  function renderValue(v, geo, caption) {
    if (v === null || v === undefined) return h("span", { class: "muted mono" }, "None");
    if (typeof v !== "object") return h("span", { class: "mono val" }, typeof v === "string" ? JSON.stringify(v) : String(v));
    if (isImage(v)) return renderImage(v, geo, caption);
    if (isBox(v)) return renderBoxes([v], geo);
    if (isPage(v)) {
      var href = webHref(v.url);
      return h("span", { class: "chip page" }, "page ",
        href ? h("a", { href: href, target: "_blank", rel: "noopener noreferrer" }, v.$page) : h("b", {}, v.$page),
        !href && v.url ? h("span", { class: "muted mono page-url" }, " " + v.url) : null,
        v.words ? h("span", { class: "muted" }, " · " + v.words + " words") : null);
    }
    if (typeof v.$entity === "string") {
      return h("span", { class: "chip entity" }, "entity ", h("b", {}, v.$entity),
        typeof v.score === "number" ? h("span", { class: "muted" }, " " + v.score.toFixed(2)) : null);
    }
    if (Array.isArray(v)) {
      if (!v.length) return h("span", { class: "mono muted" }, "[]");
      if (v.every(isBox)) return renderBoxes(v, geo);
      if (v.every(function (x) { return x === null || typeof x !== "object"; })) {
        return h("span", { class: "mono val" }, JSON.stringify(v));
      }
      return h("div", { class: "figrow" }, v.map(function (x) { return renderValue(x, geo); }));
    }
    var keys = Object.keys(v);
    return h("table", { class: "kv" }, keys.map(function (k) {
      return h("tr", {}, h("th", {}, k), h("td", {}, renderValue(v[k], geo, k)));
    }));
  }

  /** Whether a value holds something the text observation does not show: an image, a box
   * or a page (its link). */
  function hasVisual(v) {
    var found = false;
    walkValues(v, function (x) { if (isImage(x) || isBox(x) || isPage(x)) found = true; });
    return found;
  }

  // -- view 3: one sample ------------------------------------------------------------------

  /** The model calls a step's tool (or advisors) made, beside the step's own: "tool: 2 calls ·
   * 310→25 tok"; null for a step whose tool asked no model (most). */
  function toolCallsMetric(st) {
    if (!st.tool_calls) return null;
    var u = st.tool_usage || {};
    var cached = st.tool_cached_calls ? ", " + st.tool_cached_calls + " from hammr's cache" : "";
    return h("span", { class: "metric", title: "model calls made by the step's tool (and advisors), prompt → completion tokens" + cached },
      "tool: " + plural(st.tool_calls, "call") + " · " + (u.prompt_tokens || 0) + "→" + (u.completion_tokens || 0) + " tok");
  }

  function renderStep(st, geo, agent) {
    var tokens = st.usage ? (st.usage.prompt_tokens || 0) + "→" + (st.usage.completion_tokens || 0) : "";
    var head = h("div", { class: "step-head" },
      h("span", { class: "step-no" }, "#" + st.index),
      st.tool ? h("span", { class: "tool mono" }, st.tool) : (st.finish != null ? h("span", { class: "tool mono" }, "Finish") : null),
      st.router ? h("span", { class: "badge router", title: "chosen by the " + st.router + " router, no LLM call" }, "router: " + st.router) : null,
      st.forced ? h("span", { class: "badge warn", title: "the agent was made to finish" }, "forced") : null,
      st.cached ? h("span", { class: "badge muted" }, "cached") : null,
      st.error_kind ? h("span", { class: "badge err" }, st.error_kind) : null,
      retrievedChip(st),
      h("span", { class: "grow" }),
      h("span", { class: "metric", title: "prompt → completion tokens" }, tokens ? tokens + " tok" : ""),
      toolCallsMetric(st),
      h("span", { class: "metric", title: "LLM latency" }, "llm " + secs(st.llm_latency_s)),
      st.tool ? h("span", { class: "metric", title: "tool latency" }, "tool " + secs(st.tool_latency_s)) : null);
    var body = h("div", { class: "step-body" });
    // memory retrieved for the step comes before its model call; a memory tool's after its act
    var recs = records(st);
    var before = recs.filter(function (r) { return r.policy !== "tool"; });
    var after = recs.filter(function (r) { return r.policy === "tool"; });
    add(body, renderRetrieved(before, "before"));
    if (st.thought) add(body, h("div", { class: "row thought" }, h("span", { class: "tag" }, "Thought"), h("div", { class: "txt" }, st.thought)));
    if (st.action) {
      add(body, h("div", { class: "row act" }, h("span", { class: "tag" }, "Act"), h("code", { class: "mono act-code" }, st.action)));
    }
    add(body, renderRetrieved(after, "after"));
    var args = st.arguments || {};
    if (Object.keys(args).length && hasVisual(args)) {
      add(body, h("div", { class: "row args" }, h("span", { class: "tag" }, "Args"),
        h("div", { class: "vals" }, Object.keys(args).filter(function (k) { return hasVisual(args[k]); }).map(function (k) {
          return h("div", { class: "val-block" }, h("div", { class: "var mono" }, k), renderValue(args[k], geo, k));
        }))));
    }
    if (st.error) {
      add(body, h("div", { class: "row error" }, h("span", { class: "tag" }, "Error"),
        h("div", { class: "txt" }, st.error_kind ? h("b", {}, st.error_kind + ": ") : null, st.error)));
    }
    if (st.child) add(body, renderTrace(st.child, geo, false));
    if (st.observation && !st.error) {
      add(body, h("div", { class: "row observe" }, h("span", { class: "tag" }, "Observe"), h("pre", { class: "txt obs" }, st.observation)));
    }
    if (st.output !== null && st.output !== undefined && hasVisual(st.output)) {
      add(body, h("div", { class: "row output" }, h("span", { class: "tag" }, "Output"),
        h("div", { class: "vals" }, h("div", { class: "val-block" },
          st.output_var ? h("div", { class: "var mono" }, st.output_var) : null, renderValue(st.output, geo, st.output_var)))));
    }
    if (st.finish !== null && st.finish !== undefined) {
      add(body, h("div", { class: "row finish" }, h("span", { class: "tag" }, "Finish"), h("div", { class: "txt" }, h("b", {}, String(st.finish)))));
    }
    if (st.raw) add(body, h("details", { class: "raw" }, h("summary", {}, "raw model output"), h("pre", { class: "mono" }, st.raw)));
    return h("div", { class: "step" + (st.error_kind ? " has-error" : "") + (st.router ? " routed" : ""), "data-step": st.index, "data-agent": agent }, head, body);
  }

  // -- memory: what each step was given from experience, reflection or insight memory ------

  /** Runs a source link may point at: names from the store (or the report), fetched once. */
  var knownRuns = null;
  function runNames() {
    if (STATIC) return Promise.resolve(Object.keys(STATIC.samples || {}));
    if (!knownRuns) {
      knownRuns = fetchJSON("run-names").then(function (d) { return d.runs || []; })
        .catch(function () { knownRuns = null; return []; });
    }
    return knownRuns;
  }

  var LIST_NOUNS = { hits: "experience", reflections: "reflection", rules: "rule", insights: "insight", examples: "example" };
  var RECORD_KEYS = ["source", "policy", "text", "error", "query", "hits", "rounds", "notes", "tool"];

  function isObj(x) { return !!x && typeof x === "object" && !Array.isArray(x); }
  function records(st) { return Array.isArray(st && st.retrieved) ? st.retrieved.filter(isObj) : []; }

  /** The lists a record retrieved ({key: items}): `hits`, the lists a memory is known to write
   * (Reflexion's reflections, ExpeL's rules and examples: objects or strings) and any other
   * list of objects (a `task` pair of strings is a field, not something retrieved). */
  function recordLists(r) {
    var out = {};
    Object.keys(r).forEach(function (k) {
      var v = r[k];
      if (!Array.isArray(v) || !v.length || (RECORD_KEYS.indexOf(k) >= 0 && k !== "hits")) return;
      if (LIST_NOUNS[k] || v.every(isObj)) out[k] = v;
    });
    return out;
  }

  /** {noun: count} over a trace's steps and its children's. */
  function retrievedCounts(trace, out) {
    out = out || { steps: 0, items: {} };
    if (!trace) return out;
    (trace.steps || []).forEach(function (st) {
      var recs = records(st);
      if (recs.length) out.steps += 1;
      recs.forEach(function (r) {
        var lists = recordLists(r);
        Object.keys(lists).forEach(function (k) {
          var noun = LIST_NOUNS[k] || k;
          out.items[noun] = (out.items[noun] || 0) + lists[k].length;
        });
      });
      if (st.child) retrievedCounts(st.child, out);
    });
    return out;
  }

  function nouns(n, noun) { return n + " " + noun + (n === 1 || /s$/.test(noun) ? "" : "s"); }

  function countsText(c) {
    var parts = Object.keys(c.items).map(function (noun) { return nouns(c.items[noun], noun); });
    return parts.length ? parts.join(", ") + " retrieved" : "";
  }

  function recordTitle(r) {
    var src = String(r.source || "memory").toLowerCase();
    if (src === "muse") {
      return r.policy === "tool" ? (r.tool || "SearchExperiences") + " (agent)" : "every-step search";
    }
    if (src === "reflexion") return "Reflexion reflections";
    if (src === "expel") return "ExpeL rules and examples";
    return String(r.source || "memory");
  }

  function policyNote(r) {
    if (r.policy === "tool") return "the agent called it";
    if (r.policy === "advisor") return "retrieved before the model call";
    return r.policy ? String(r.policy) : "";
  }

  function sampleHash(run, dataset, id, step, path) {
    var p = {};
    if (typeof step === "number") p.step = step;
    if (path) p.path = path;
    return "#/run/" + enc(run) + "/sample/" + enc(dataset) + "/" + enc(id) + qs(p);
  }

  /** The experience's source sample: a link into the viewer when its run is here, else text. */
  function sourceRef(src, runs) {
    if (typeof src === "string") src = sourceFromId(src, runs);
    if (typeof src === "string") return h("span", { class: "source-text" }, src);
    if (!isObj(src) || src.run == null || src.dataset == null || src.sample_id == null) return null;
    var where = (src.trace_path ? src.trace_path + " " : "") + (typeof src.step === "number" ? "step " + src.step : "");
    var label = [String(src.run), String(src.dataset), String(src.sample_id)].join(" / ") + (where ? " · " + where : "");
    if (runs.indexOf(String(src.run)) >= 0) {
      return h("a", { class: "source-link", href: sampleHash(src.run, src.dataset, src.sample_id, src.step, src.trace_path),
        title: "open the sample this was learned from" }, label);
    }
    return h("span", { class: "source-text", title: "run " + src.run + " is not in this store" }, label,
      h("span", { class: "muted" }, " (run not here)"));
  }

  /** A source written as one string, "run/dataset/sample_id" (Reflexion's and ExpeL's entry
   * ids), as its parts when it starts with a known run (a dataset name holds no '/'; a run or
   * sample name may); else the string itself. */
  function sourceFromId(id, runs) {
    var best = null;
    runs.forEach(function (run) {
      if (id.indexOf(run + "/") === 0 && (best === null || run.length > best.length)) best = run;
    });
    if (best === null) return id;
    var rest = id.slice(best.length + 1), cut = rest.indexOf("/");
    if (cut <= 0 || cut === rest.length - 1) return id;
    return { run: best, dataset: rest.slice(0, cut), sample_id: rest.slice(cut + 1) };
  }

  function foldText(text, cls, limit) {
    text = String(text);
    if (text.length <= limit) return h("div", { class: cls }, text);
    return h("details", { class: cls + " long" }, h("summary", {}, truncate(text.replace(/\s+/g, " "), Math.min(limit, 160))),
      h("div", {}, text));
  }

  function learnedBadge(x) {
    if (x === "success") return h("span", { class: "badge ok learned", "data-learned": x, title: "learned from a run that answered right" }, "✓ success");
    if (x === "failure") return h("span", { class: "badge err learned", "data-learned": x, title: "learned from a run that answered wrong" }, "✗ failure");
    return null;
  }

  function renderHit(hit, i, runs) {
    if (!isObj(hit)) return h("li", { class: "hit" }, String(hit));
    var also = Array.isArray(hit.also_found_by) ? hit.also_found_by.map(String) : [];
    return h("li", { class: "hit" + (hit.learned_from ? " " + hit.learned_from : ""), "data-rank": i + 1, "data-id": hit.id || null },
      h("div", { class: "hit-head" },
        h("span", { class: "hit-rank" }, "#" + (i + 1)),
        learnedBadge(hit.learned_from),
        typeof hit.score === "number" ? h("span", { class: "badge hit-score", title: "the annotator's score" }, hit.score + "/10") : null,
        hit.viewpoint ? h("span", { class: "chip hit-view", title: "the viewpoint that found it" }, String(hit.viewpoint),
          typeof hit.round === "number" && hit.round > 1 ? h("span", { class: "muted" }, " · round " + hit.round) : null) : null,
        also.length ? h("span", { class: "hit-also muted small" }, "also found by " + also.join(", ")) : null,
        h("span", { class: "grow" }),
        typeof hit.similarity === "number" ? h("span", { class: "metric hit-sim", title: "cosine similarity" }, "sim " + hit.similarity.toFixed(3)) : null),
      hasText(hit.guidance) ? foldText(hit.guidance, "hit-guidance", 420) : h("div", { class: "hit-guidance muted" }, "no guidance"),
      hasText(hit.action) ? h("div", { class: "hit-action" }, h("span", { class: "muted small" }, "its action "),
        h("code", { class: "mono" }, truncate(hit.action, 300))) : null,
      hit.source ? h("div", { class: "hit-source small" }, h("span", { class: "muted" }, "from "), sourceRef(hit.source, runs)) : null);
  }

  /** A short field value on one line: a list's items joined, an object as JSON. */
  function fieldText(v) {
    if (Array.isArray(v) && v.every(function (x) { return x === null || typeof x !== "object"; })) return v.join(" / ");
    if (v !== null && typeof v === "object") return truncate(JSON.stringify(v), 200);
    return truncate(String(v), 200);
  }

  /** One item of a list other than `hits` (a reflection, a rule, an example). */
  function renderItem(item, i, runs) {
    if (!isObj(item)) return h("li", { class: "mem-item" }, h("span", { class: "hit-rank" }, "#" + (i + 1) + " "), String(item));
    var text = hasText(item.text) ? item.text : hasText(item.guidance) ? item.guidance : hasText(item.rule) ? item.rule : null;
    var rest = Object.keys(item).filter(function (k) {
      return ["text", "guidance", "rule", "similarity", "score", "source", "learned_from"].indexOf(k) < 0;
    });
    var extra = {};
    rest.forEach(function (k) { extra[k] = item[k]; });
    return h("li", { class: "mem-item" + (item.learned_from ? " " + item.learned_from : ""), "data-rank": i + 1 },
      h("div", { class: "hit-head" }, h("span", { class: "hit-rank" }, "#" + (i + 1)),
        learnedBadge(item.learned_from),
        typeof item.score === "number" ? h("span", { class: "badge hit-score" }, String(item.score)) : null,
        h("span", { class: "grow" }),
        typeof item.similarity === "number" ? h("span", { class: "metric hit-sim" }, "sim " + item.similarity.toFixed(3)) : null),
      text !== null ? foldText(text, "hit-guidance", 420) : null,
      rest.length ? h("div", { class: "mem-extra muted small" }, rest.map(function (k, j) {
        return [j ? " · " : null, h("span", { class: "mem-field" }, k.replace(/_/g, " ") + " ", h("b", {}, fieldText(item[k])))];
      })) : null,
      item.source ? h("div", { class: "hit-source small" }, h("span", { class: "muted" }, "from "), sourceRef(item.source, runs)) : null);
  }

  function itemList(key, items, runs, labelled) {
    var SHOW = 3, render = key === "hits" ? renderHit : renderItem;
    var lis = items.map(function (x, i) { return render(x, i, runs); });
    var noun = LIST_NOUNS[key] || key;
    var label = labelled ? h("div", { class: "list-label" }, noun + "s") : null;
    var list = h("ol", { class: "hits", "data-key": key }, lis.slice(0, SHOW));
    if (lis.length <= SHOW) return [label, list];
    return [label, list, h("details", { class: "more-hits" }, h("summary", {}, nouns(lis.length - SHOW, "more " + noun)),
      h("ol", { class: "hits", start: SHOW + 1, "data-key": key }, lis.slice(SHOW)))];
  }

  function renderRecord(r, runs) {
    var q = isObj(r.query) ? r.query : null;
    var views = q && Array.isArray(q.viewpoints) ? q.viewpoints.map(String) : [];
    var lists = recordLists(r);
    var kinds = Object.keys(lists);
    var rounds = Array.isArray(r.rounds) ? r.rounds.filter(isObj) : [];
    var notes = Array.isArray(r.notes) ? r.notes : [];
    var extraKeys = Object.keys(r).filter(function (k) { return RECORD_KEYS.indexOf(k) < 0 && !lists[k]; });
    var extra = {};
    extraKeys.forEach(function (k) { extra[k] = r[k]; });
    var qextra = q ? Object.keys(q).filter(function (k) { return k !== "viewpoints" && k !== "k"; }) : [];
    return h("div", { class: "mem-record" + (r.error ? " has-error" : ""), "data-source": String(r.source || ""), "data-policy": String(r.policy || "") },
      h("div", { class: "mem-head" },
        h("b", { class: "mem-title" }, recordTitle(r)),
        h("span", { class: "muted small" }, policyNote(r)),
        views.length ? h("span", { class: "mem-query" }, h("span", { class: "muted small" }, views.length > 1 ? "viewpoints " : "viewpoint "),
          views.map(function (v, i) { return [i ? h("span", { class: "sep" }, "→") : null, h("span", { class: "chip view" }, v)]; })) : null,
        q && q.k != null ? h("span", { class: "mem-k muted small" }, "k = " + q.k) : null,
        hasText(r.query) ? h("span", { class: "mem-query-text muted small", title: r.query }, "query “" + truncate(r.query, 90) + "”") : null,
        qextra.map(function (k) { return h("span", { class: "muted small" }, k + " = " + (typeof q[k] === "object" ? JSON.stringify(q[k]) : String(q[k]))); }),
        h("span", { class: "grow" }),
        kinds.map(function (k) {
          return h("span", { class: "metric" }, nouns(lists[k].length, LIST_NOUNS[k] || k));
        })),
      r.error ? h("div", { class: "row error" }, h("span", { class: "tag" }, "Error"), h("div", { class: "txt" }, String(r.error))) : null,
      kinds.map(function (k) { return itemList(k, lists[k], runs, kinds.length > 1); }),
      !kinds.length && !r.error ? h("div", { class: "muted small" }, "nothing retrieved") : null,
      notes.length ? h("ul", { class: "mem-notes small muted" }, notes.map(function (n) { return h("li", {}, String(n)); })) : null,
      rounds.length ? h("details", { class: "mem-rounds" }, h("summary", {}, "search rounds (" + rounds.length + ")"),
        h("table", { class: "kv rounds" }, h("tr", {}, ["round", "viewpoint", "method", "eligible", "found"].map(function (x) { return h("th", {}, x); })),
          rounds.map(function (x) {
            return h("tr", {}, ["round", "viewpoint", "method", "eligible", "found"].map(function (k) { return h("td", {}, x[k] == null ? "–" : String(x[k])); }));
          }))) : null,
      extraKeys.length ? h("details", { class: "mem-extra" }, h("summary", {}, "more fields"), renderValue(extra, { root: null, boxes: [], regions: [] })) : null,
      hasText(r.text) ? h("details", { class: "mem-shown" }, h("summary", {}, "what the model was shown"), h("pre", { class: "txt" }, r.text)) : null);
  }

  /** A step's "Retrieved" panel: every record its memory gave it (collapsed when many). */
  function renderRetrieved(recs, when) {
    if (!recs.length) return null;
    var body = h("div", { class: "mem-records" }, h("span", { class: "muted small" }, "…"));
    runNames().then(function (runs) {
      body.textContent = "";
      add(body, recs.map(function (r) { return renderRecord(r, runs); }));
    });
    var c = retrievedCounts({ steps: [{ retrieved: recs }] });
    var errors = recs.filter(function (r) { return r.error; }).length;
    var many = recs.length > 3;
    return h("details", { class: "retrieved " + when, open: !many },
      h("summary", {}, h("span", { class: "tag" }, "Memory"),
        h("span", { class: "mem-summary" }, countsText(c) || "nothing retrieved"),
        h("span", { class: "muted small" }, " · " + plural(recs.length, "retrieval")),
        errors ? h("span", { class: "badge err" }, plural(errors, "error")) : null),
      body);
  }

  function retrievedChip(st) {
    var recs = records(st);
    if (!recs.length) return null;
    var n = 0;
    recs.forEach(function (r) { var l = recordLists(r); Object.keys(l).forEach(function (k) { n += l[k].length; }); });
    var bad = recs.some(function (r) { return r.error; });
    return h("span", { class: "badge memory" + (bad ? " err" : ""), title: "retrieved from memory for this step" }, "memory " + n);
  }

  /** Scroll to (and mark) the step a link asked for: `?step=N`, in the child trace at
   * `path` ("2.child": the child of step 2) when given. */
  function focusStep(params) {
    var n = parseInt(params.step, 10);
    if (isNaN(n)) return;
    var block = document.querySelector(".trace > details.agent-block.top");
    var path = params.path ? String(params.path).split(".") : [];
    for (var i = 0; block && i + 1 < path.length; i += 2) {
      var parent = stepIn(block, parseInt(path[i], 10));
      block = parent ? parent.querySelector("details.agent-block") : null;
    }
    var el = block ? stepIn(block, n) : null;
    if (!el) return;
    for (var d = el.parentElement; d; d = d.parentElement) if (d.tagName === "DETAILS") d.open = true;
    el.classList.add("target");
    el.scrollIntoView({ block: "center" });
  }

  function stepIn(block, n) {
    var all = block.querySelectorAll(".step[data-step='" + n + "']");
    for (var i = 0; i < all.length; i++) if (all[i].closest("details.agent-block") === block) return all[i];
    return null;
  }

  // -- MulProg: the program line by line, and its grounded explanation -----------------------

  /** A trace a program made (MulProg): its steps carry the program line they ran. */
  function isProgramTrace(t) {
    return !!t && (t.agent === "MulProg" ||
      (t.steps || []).some(function (st) { return typeof st.line === "number"; }));
  }

  function finite(x) { return typeof x === "number" && isFinite(x); }
  function validBox(b) { return isBox(b) && b.$box.length === 4 && b.$box.every(finite); }
  function pcent(x) { return (100 * x).toFixed(4) + "%"; }

  /** The PLAN steps by attempt: an attempt ends at the step carrying its program or its errors
   * (one step for a whole program, one per line under a grammar). */
  function planAttempts(steps) {
    var out = [], cur = [];
    steps.forEach(function (st) {
      if (st.tool !== "PLAN") return;
      cur.push(st);
      if (st.action || st.error_kind || st.error) { out.push(cur); cur = []; }
    });
    if (cur.length) out.push(cur);
    return out;
  }

  function renderPlanning(attempts) {
    if (!attempts.length) return null;
    function failed(a) { var last = a[a.length - 1]; return !!(last.error_kind || last.error); }
    var rejected = attempts.filter(failed).length;
    var calls = 0, tokens = 0;
    attempts.forEach(function (a) {
      a.forEach(function (st) {
        calls += 1;
        if (st.usage) tokens += (st.usage.prompt_tokens || 0) + (st.usage.completion_tokens || 0);
      });
    });
    return h("details", { class: "plan-attempts" },
      h("summary", {}, h("span", { class: "section-label" }, "Planning"),
        h("span", { class: "muted small" }, attempts.length + " attempt" + (attempts.length === 1 ? "" : "s") +
          " · " + calls + " LLM call" + (calls === 1 ? "" : "s") + (tokens ? " · " + tokens + " tok" : "")),
        rejected ? h("span", { class: "badge err" }, rejected + " rejected") : null),
      attempts.map(function (a, i) {
        var last = a[a.length - 1], bad = failed(a);
        var raw = a.map(function (st) { return st.raw || ""; }).join("\n");
        return h("div", { class: "plan-attempt" + (bad ? " has-error" : ""), "data-attempt": i },
          h("div", { class: "plan-head" }, h("b", {}, "Attempt " + (i + 1)),
            bad ? h("span", { class: "badge err" }, last.error_kind || "rejected")
              : (last.action ? h("span", { class: "badge ok" }, "accepted") : null),
            a.length > 1 ? h("span", { class: "muted small" }, a.length + " calls (one per line)") : null,
            h("span", { class: "grow" }),
            h("span", { class: "metric" }, "llm " + secs(a.reduce(function (x, st) { return x + (st.llm_latency_s || 0); }, 0)))),
          h("div", { class: "row" }, h("span", { class: "tag" }, "Wrote"), h("pre", { class: "mono plan-raw" }, raw || "(nothing)")),
          last.error ? h("div", { class: "row error" }, h("span", { class: "tag" }, "Errors"), h("pre", { class: "txt" }, last.error)) : null);
      }));
  }

  /** A program line's output, compactly: its boxes on a thumbnail, a crop and its place, a value. */
  function lineOutput(st, geo) {
    if (st.error_kind || st.error) {
      return h("div", { class: "line-error" },
        st.error_kind ? h("span", { class: "badge err" }, st.error_kind) : null, h("span", { class: "txt" }, st.error || ""));
    }
    var v = st.output, obs = st.observation || "", parts = [];
    if (isBox(v) || (Array.isArray(v) && v.length && v.every(isBox))) {
      var boxes = (Array.isArray(v) ? v : [v]).filter(validBox);
      if (geo.root) {
        parts.push(overlayFigure(geo.root, boxes.map(function (b) { return { xywh: b.$box, label: boxLabel(b) }; }),
          { width: 150, small: true, nolabels: true, alt: "the boxes on the image" }));
      }
      parts.push(h("span", { class: "line-val" }, boxes.length + (boxes.length === 1 ? " box" : " boxes")));
    } else if (isImage(v)) {
      parts.push(overlayFigure(v, [], { width: 110, small: true, alt: "the crop" }));
      if (Array.isArray(v.region) && v.region.every(finite) && geo.root) {
        parts.push(overlayFigure(geo.root, [{ xywh: v.region, label: "crop", region: true }],
          { width: 110, small: true, nolabels: true, alt: "its place on the image" }));
      }
      parts.push(h("span", { class: "line-val muted small" }, v.size ? v.size[0] + "×" + v.size[1] : "",
        Array.isArray(v.region) ? " of [" + v.region.map(function (x) { return Math.round(x); }).join(", ") + "]" : ""));
    } else if (v !== null && v !== undefined && typeof v === "object" && hasVisual(v)) {
      parts.push(renderValue(v, geo));
    } else {
      var text = obs || (v === null || v === undefined ? "None" : typeof v === "string" ? v : JSON.stringify(v));
      var final = st.finish !== null && st.finish !== undefined;
      parts.push(h("span", { class: "mono line-val" + (final ? " final" : "") }, final ? "→ " + text : text));
    }
    return h("div", { class: "line-out", title: obs || null }, parts);
  }

  function renderProgramLine(i, st, text, geo, agent) {
    var source = st && typeof st.action === "string" ? st.action : (text || "");
    var state = !st ? "not-run" : (st.error_kind || st.error) ? "has-error" : "ran";
    return h("tr", { class: "prog-line " + state, "data-line": i },
      h("td", { class: "ln mono" }, String(i + 1)),
      h("td", { class: "src" }, h("code", { class: "mono" }, source),
        st ? h("details", { class: "line-more" }, h("summary", {}, "step details"), renderStep(st, geo, agent)) : null),
      h("td", { class: "out" }, st ? lineOutput(st, geo) : h("span", { class: "muted small" }, "not run")));
  }

  /** The explanation with each [BOX] token a chip; hovering or clicking one shows its boxes
   * on the question's image (the others dimmed). */
  function renderExplanation(st, geo) {
    var out = st.output && typeof st.output === "object" && !Array.isArray(st.output) ? st.output : {};
    var text = typeof out.text === "string" ? out.text : String(st.observation || "");
    var refs = Array.isArray(out.boxes) ? out.boxes : [];
    var root = geo.root && Array.isArray(geo.root.size) && geo.root.size.every(finite) &&
      geo.root.size[0] > 0 && geo.root.size[1] > 0 ? geo.root : null;
    var chips = [], boxEls = [], pinned = null, hover = null;

    function update() {
      var active = hover !== null ? hover : pinned;
      chips.forEach(function (c, i) {
        c.classList.toggle("active", i === active);
        c.setAttribute("aria-pressed", i === pinned ? "true" : "false");
      });
      boxEls.forEach(function (el) {
        var r = +el.getAttribute("data-ref");
        el.classList.toggle("on", active !== null && r === active);
        el.classList.toggle("off", active !== null && r !== active);
      });
    }

    function chip(i, ref) {
      var ok = ref && typeof ref === "object";
      var name = ok && ref.name !== null && ref.name !== undefined ? String(ref.name) : "?";
      var boxes = ok && Array.isArray(ref.boxes) ? ref.boxes.filter(validBox) : [];
      var color = PALETTE[i % PALETTE.length];
      if (root) {
        var W = root.size[0], H = root.size[1];
        boxes.forEach(function (b) {
          var x = b.$box;
          boxEls.push(h("div", { class: "xbox", "data-ref": i, style: "left:" + pcent(x[0] / W) + ";top:" + pcent(x[1] / H) +
            ";width:" + pcent(x[2] / W) + ";height:" + pcent(x[3] / H) + ";border-color:" + color },
            h("span", { class: "xbox-label", style: "background:" + color }, name)));
        });
      }
      return h("button", { type: "button", class: "box-chip" + (ok ? "" : " missing"), "data-ref": i, "aria-pressed": "false",
        title: boxes.length + (boxes.length === 1 ? " box" : " boxes") + " of " + name + " (click to keep it shown)",
        on: {
          mouseenter: function () { hover = i; update(); },
          mouseleave: function () { hover = null; update(); },
          click: function () { pinned = pinned === i ? null : i; update(); },
        } },
        h("span", { class: "swatch", style: "background:" + color }),
        h("span", { class: "chip-name" }, name),
        h("span", { class: "chip-count" }, String(boxes.length)));
    }

    var para = h("p", { class: "explain-text" });
    text.split("[BOX]").forEach(function (piece, i) {
      if (i) {
        var c = chip(i - 1, refs[i - 1]);
        chips.push(c);
        add(para, c);
      }
      if (piece) add(para, piece);
    });
    var fig = null;
    if (root) {
      var src = imageURL(root.$image), w = root.size[0], hgt = root.size[1];
      var dispW = Math.max(260, Math.min(480, w));
      fig = h("figure", { class: "figure explain-figure" },
        h("div", { class: "imgwrap explain-wrap", style: "width:" + dispW + "px" },
          src ? h("img", { src: src, alt: "the question's image", width: dispW, class: w < 120 ? "pixelated" : null })
            : h("div", { class: "noimg", style: "aspect-ratio:" + w + "/" + hgt }, "image not stored"),
          h("div", { class: "xlayer" }, boxEls)),
        h("figcaption", {}, chips.length ? "hover or click an object to see its boxes" : "no grounded objects"));
    }
    return h("div", { class: "explanation", "data-step": st.index },
      h("div", { class: "section-head" }, h("span", { class: "section-label" }, "Explanation"),
        st.router ? h("span", { class: "badge router", title: "written by code, no LLM call" }, st.router) : null),
      h("div", { class: "explain-body" }, fig,
        h("div", { class: "explain-side" }, para,
          st.error ? h("div", { class: "explain-note" }, st.error) : null)));
  }

  function renderProgram(t, geo) {
    var steps = t.steps || [];
    var src = null, byLine = {}, maxLine = -1, others = [], explain = null;
    steps.forEach(function (st) {
      if (typeof st.line === "number") {
        byLine[st.line] = st;
        maxLine = Math.max(maxLine, st.line);
      } else if (st.tool === "PLAN") {
        if (typeof st.action === "string" && st.action) src = st.action;
      } else if (st.tool === "EXPLAIN" && !explain) {
        explain = st;
      } else {
        others.push(st);
      }
    });
    var srcLines = src ? src.split("\n") : [];
    var n = Math.min(Math.max(srcLines.length, maxLine + 1), 10000);
    var rows = [];
    for (var i = 0; i < n; i++) rows.push(renderProgramLine(i, byLine[i], srcLines[i], geo, t.agent));
    return h("div", { class: "mulprog" },
      renderPlanning(planAttempts(steps)),
      h("div", { class: "program-wrap" },
        h("div", { class: "section-head" }, h("span", { class: "section-label" }, "Program"),
          h("span", { class: "muted small" }, n + " line" + (n === 1 ? "" : "s"))),
        n ? h("table", { class: "program" }, h("tbody", {}, rows)) : h("p", { class: "muted small" }, "No program was written.")),
      others.length ? h("div", { class: "steps" }, others.map(function (st) { return renderStep(st, geo, t.agent); })) : null,
      explain ? renderExplanation(explain, geo) : null);
  }

  // -- AVIS: the planner's choices on the transition graph, the reasoner's verdicts ---------

  var VERDICTS = {
    not_informative: { text: "not informative", cls: "not-informative" },
    informative: { text: "informative", cls: "informative" },
    answerable: { text: "answerable", cls: "answerable" },
  };

  /** A trace AVIS made: its action steps carry the graph state they were planned at. */
  function isAvisTrace(t) {
    return !!t && (String(t.agent || "").indexOf("AVIS") === 0 ||
      (t.steps || []).some(function (st) { return typeof st.state === "string"; }));
  }

  function stepQuery(st) {
    var a = st && st.arguments;
    return a && typeof a.query === "string" ? a.query : null;
  }

  function hasText(x) { return typeof x === "string" && x.trim() !== ""; }
  function isFinish(st) { return st.finish !== null && st.finish !== undefined; }
  function plural(n, word) { return n + " " + word + (n === 1 ? "" : "s"); }

  /** Per action step: the working memory (a stack of graph states) before and after it, and
   * the actions already tried at its state. An informative output pushes its action's state;
   * the next step's own `state` says where the planner went (a backtrack stays or pops). */
  function avisFlow(actions) {
    var stack = [], out = [];
    function states() { return stack.map(function (e) { return e.state; }); }
    function goTo(state) {
      for (var j = stack.length - 1; j >= 0; j--) {
        if (stack[j].state === state) { stack.length = j + 1; return; }
      }
      stack.push({ state: state, tried: [] });
    }
    actions.forEach(function (st, i) {
      var state = typeof st.state === "string" ? st.state : "START";
      if (!stack.length) stack.push({ state: state, tried: [] });
      else goTo(state);
      var top = stack[stack.length - 1], before = states();
      var cands = Array.isArray(st.candidates) ? st.candidates.map(String) : [];
      var tried = top.tried.filter(function (a, k, all) {
        return a !== st.tool && cands.indexOf(a) < 0 && all.indexOf(a) === k;
      });
      if (st.tool) top.tried.push(st.tool);
      var ended = isFinish(st);
      if (!ended) {
        if (st.verdict === "informative" && !st.backtrack && st.tool) stack.push({ state: st.tool, tried: [] });
        var next = actions[i + 1];
        if (next && typeof next.state === "string") goTo(next.state);
      }
      var after = states(), last = after[after.length - 1], change;
      if (ended) change = st.verdict === "answerable" ? "answered" : "finished";
      else if (after.length > before.length) change = "push " + last;
      else if (after.length < before.length) change = "pop to " + last;
      else if (last !== before[before.length - 1]) change = "move to " + last;
      else change = st.backtrack ? "stay, choose again" : "stay";
      out.push({ st: st, cands: cands, tried: tried, before: before, after: after, change: change, ended: ended });
    });
    return out;
  }

  function verdictBadge(v) {
    var known = VERDICTS[v];
    if (!known) return h("span", { class: "avis-verdict none" }, v ? String(v) : "no verdict");
    return h("span", { class: "avis-verdict " + known.cls, "data-verdict": v }, known.text);
  }

  /** `#` in the knowledge sub-question, marked where the visual answer goes. */
  function withHoles(text) {
    var out = [];
    String(text).split("#").forEach(function (piece, i) {
      if (i) out.push(h("span", { class: "hole", title: "the visual answer goes here" }, "#"));
      if (piece) out.push(piece);
    });
    return out;
  }

  /** The text with `mark` (case-insensitively) highlighted where it first occurs. */
  function withMark(text, mark) {
    text = String(text);
    var at = hasText(mark) ? text.toLowerCase().indexOf(String(mark).toLowerCase()) : -1;
    if (at < 0) return [text];
    return [text.slice(0, at), h("mark", { class: "filled" }, text.slice(at, at + mark.length)), text.slice(at + mark.length)];
  }

  function renderAvisQuestions(decomp, visual, filled, geo, agent) {
    var out = decomp && decomp.output && typeof decomp.output === "object" && !Array.isArray(decomp.output) ? decomp.output : {};
    var vq = hasText(out.visual) ? out.visual : null, kq = hasText(out.knowledge) ? out.knowledge : null;
    function line(cls, label, body, note) {
      return h("div", { class: "avis-subq " + cls }, h("span", { class: "tag" }, label),
        h("div", { class: "txt" }, body), note ? h("span", { class: "muted small note" }, note) : null);
    }
    var filledLine = null;
    if (filled) {
      filledLine = line("filled", "Filled", withMark(filled.text, visual ? visual.st.extracted : null),
        filled.asked ? "asked at step #" + filled.step.index + " (" + (filled.step.tool || "?") + ")" : "not asked: the run ended first");
    } else if (kq && kq.indexOf("#") >= 0) {
      filledLine = line("filled pending", "Filled", h("span", { class: "muted" }, "no visual answer was found"));
    }
    return h("div", { class: "avis-questions" },
      h("div", { class: "section-head" }, h("span", { class: "section-label" }, "Sub-questions"),
        decomp && decomp.error_kind ? h("span", { class: "badge err" }, decomp.error_kind) : null),
      line("visual", "Visual", vq || h("span", { class: "muted" }, "—")),
      line("knowledge", "Knowledge", kq ? withHoles(kq) : h("span", { class: "muted" }, "—")),
      filledLine,
      visual ? h("div", { class: "muted small" }, "visual answer ", h("b", { class: "mono" }, visual.st.extracted),
        " from step #" + visual.st.index + " (" + (visual.st.tool || "?") + ")") : null,
      decomp ? h("details", { class: "line-more" }, h("summary", {}, "step details"), renderStep(decomp, geo, agent)) : null);
  }

  function entityChip(e) {
    var name = null, score = null;
    if (typeof e === "string") name = e;
    else if (Array.isArray(e)) { name = e[0]; score = e[1]; }
    else if (e && typeof e === "object") { name = e.$entity !== undefined ? e.$entity : e.name; score = e.score; }
    if (name === null || name === undefined) return null;
    return h("span", { class: "chip entity" }, h("b", {}, String(name)),
      typeof score === "number" ? h("span", { class: "muted" }, " " + score.toFixed(2)) : null);
  }

  function renderAvisContext(st, geo, agent) {
    var out = st.output && typeof st.output === "object" && !Array.isArray(st.output) ? st.output : {};
    var objects = Array.isArray(out.objects) ? out.objects.filter(function (o) { return o && typeof o === "object"; }) : [];
    var missing = Array.isArray(out.missing) ? out.missing.map(String) : [];
    function name(o, i) { return "#" + (o.id !== undefined && o.id !== null ? o.id : i) + (hasText(o.region) ? " " + o.region : ""); }
    var shapes = [];
    objects.forEach(function (o, i) { if (validBox(o.box)) shapes.push({ xywh: o.box.$box, label: name(o, i) }); });
    var fig = geo.root && shapes.length ? overlayFigure(geo.root, shapes, { width: 260, alt: "the objects on the image",
      caption: plural(shapes.length, "object") + " on the image" }) : null;
    var rows = objects.map(function (o, i) {
      var ents = Array.isArray(o.entities) ? o.entities.map(entityChip) : [];
      var text = Array.isArray(o.text) ? o.text.join(" · ") : (o.text == null ? "" : String(o.text));
      return h("tr", { class: "avis-object", "data-object": o.id !== undefined ? o.id : i },
        h("td", { class: "obj-id mono" }, "#" + (o.id !== undefined && o.id !== null ? o.id : i)),
        h("td", { class: "obj-region" }, hasText(o.region) ? o.region : h("span", { class: "muted" }, "—"),
          isImage(o.image) && Array.isArray(o.image.region) ? h("div", {}, overlayFigure(o.image, [], { width: 64, small: true, alt: "the object's crop" })) : null),
        h("td", { class: "obj-caption" }, hasText(o.caption) ? o.caption : h("span", { class: "muted" }, "—")),
        h("td", { class: "obj-entities" }, ents.filter(Boolean).length ? ents : h("span", { class: "muted" }, "—")),
        h("td", { class: "obj-text mono" }, text ? text : h("span", { class: "muted" }, "—")));
    });
    var table = rows.length ? h("table", { class: "avis-objects" },
      h("thead", {}, h("tr", {}, ["Object", "Region", "Caption", "Entities", "Text"].map(function (t) { return h("th", {}, t); }))),
      h("tbody", {}, rows)) : h("p", { class: "muted small" }, "No objects.");
    return h("div", { class: "avis-context" },
      h("div", { class: "section-head" }, h("span", { class: "section-label" }, "Visual context"),
        h("span", { class: "muted small" }, plural(objects.length, "object")),
        missing.length ? h("span", { class: "avis-missing badge warn" }, "not available: " + missing.join(", ")) : null,
        st.error_kind ? h("span", { class: "badge err" }, st.error_kind) : null),
      h("div", { class: "avis-context-body" }, fig, table),
      st.observation ? h("details", { class: "line-more" }, h("summary", {}, "as the planner reads it"), h("pre", { class: "txt obs" }, st.observation)) : null,
      h("details", { class: "line-more" }, h("summary", {}, "step details"), renderStep(st, geo, agent)));
  }

  /** Long observations fold to their first line. */
  function avisObservation(text) {
    if (!text) return null;
    var long = text.length > 280 || text.split("\n").length > 4;
    if (!long) return h("pre", { class: "txt obs avis-obs" }, text);
    return h("details", { class: "avis-obs long" },
      h("summary", {}, h("span", { class: "obs-head mono" }, truncate(text.replace(/\s+/g, " "), 150)),
        h("span", { class: "muted small" }, " " + text.length + " chars")),
      h("pre", { class: "txt obs" }, text));
  }

  /** What an action's output shows beyond its text: its boxes on the question's image (an
   * object_select's box), its images (the crop), its pages. */
  function avisVisuals(st, geo) {
    var boxes = [], imgs = [], pages = [], parts = [];
    walkValues(st.output, function (x) {
      if (validBox(x)) boxes.push(x);
      else if (isImage(x)) imgs.push(x);
      else if (isPage(x)) pages.push(x);
    });
    var obj = st.arguments && st.arguments.object;
    if (boxes.length && geo.root) {
      parts.push(overlayFigure(geo.root, boxes.map(function (b) {
        return { xywh: b.$box, label: b.label ? boxLabel(b) : (obj !== undefined && obj !== null ? "object " + obj : "box") };
      }), { width: 200, alt: "the selected object on the image",
        caption: boxes.length === 1 ? "on the image" : boxes.length + " boxes on the image" }));
    }
    imgs.slice(0, 4).forEach(function (img) {
      parts.push(overlayFigure(img, [], { width: 110, small: true, alt: "an image the action returned",
        caption: Array.isArray(img.region) ? "crop " + (img.size ? img.size[0] + "×" + img.size[1] : "") : (img.size ? img.size[0] + "×" + img.size[1] : "") }));
    });
    pages.slice(0, 6).forEach(function (p) { parts.push(renderValue(p, geo)); });
    return parts.length ? h("div", { class: "figrow avis-visuals" }, parts) : null;
  }

  function memoryChips(states, fresh) {
    return h("span", { class: "avis-stack" }, states.map(function (x, i) {
      return [i ? h("span", { class: "sep" }, "›") : null,
        h("span", { class: "mem" + (fresh && i === states.length - 1 ? " fresh" : "") }, x)];
    }));
  }

  function renderAvisStep(rec, geo, agent, phase) {
    var st = rec.st, q = stepQuery(st), args = st.arguments || {};
    var chips = rec.cands.map(function (a) {
      return h("span", { class: "avis-cand" + (a === st.tool ? " chosen" : ""), title: a === st.tool ? "chosen" : "offered" }, a);
    });
    if (st.tool && rec.cands.indexOf(st.tool) < 0) {
      chips.push(h("span", { class: "avis-cand chosen off-graph", title: "chosen, though not among the candidates" }, st.tool));
    }
    rec.tried.forEach(function (a) {
      chips.push(h("span", { class: "avis-cand tried", title: "tried before at this state" }, a));
    });
    var pushed = rec.change.indexOf("push") === 0;
    var ext = hasText(st.extracted) ? st.extracted : null;
    var head = h("div", { class: "avis-head" },
      h("span", { class: "step-no" }, "#" + st.index),
      h("span", { class: "avis-at" }, "at ", h("span", { class: "mem state" }, st.state || "START")),
      h("span", { class: "avis-arrow" }, "→"),
      h("span", { class: "tool mono" }, st.tool || "?"),
      verdictBadge(st.verdict),
      st.backtrack ? h("span", { class: "backtrack-mark", title: "the planner chose again at an earlier or the same state" }, "↩ backtrack") : null,
      st.error_kind ? h("span", { class: "badge err" }, st.error_kind) : null,
      h("span", { class: "phase muted small" }, phase + " phase"),
      h("span", { class: "grow" }),
      h("span", { class: "metric", title: "model calls in this step" }, plural(typeof st.calls === "number" ? st.calls : 1, "call")),
      toolCallsMetric(st),
      h("span", { class: "metric", title: "LLM latency" }, "llm " + secs(st.llm_latency_s)),
      h("span", { class: "metric", title: "tool latency" }, "tool " + secs(st.tool_latency_s)));
    var plan = h("div", { class: "avis-col avis-plan" },
      h("div", { class: "col-label" }, "Candidates"),
      h("div", { class: "avis-cands" }, chips.length ? chips : h("span", { class: "muted small" }, "none recorded")));
    var act = h("div", { class: "avis-col avis-act" },
      h("div", { class: "col-label" }, "Action"),
      h("div", { class: "avis-call" }, h("b", { class: "mono" }, st.tool || "?"),
        q !== null ? h("span", { class: "avis-query" }, q) : null,
        args.object !== undefined && args.object !== null ? h("span", { class: "chip" }, "object " + String(args.object)) : null),
      st.error ? h("div", { class: "row error" }, h("span", { class: "tag" }, "Error"), h("div", { class: "txt" }, st.error)) : null,
      avisVisuals(st, geo),
      avisObservation(st.observation));
    var reason = h("div", { class: "avis-col avis-reason" },
      h("div", { class: "col-label" }, "Reasoner"),
      h("div", { class: "avis-verdict-line" }, verdictBadge(st.verdict),
        st.backtrack ? h("span", { class: "backtrack-mark" }, "↩ backtrack") : null),
      ext ? h("div", { class: "avis-extracted" }, h("span", { class: "muted small" }, "extracted "), h("b", { class: "mono" }, ext)) : null,
      hasText(st.reasoner) ? h("details", { class: "avis-reasoner" },
        h("summary", {}, "reasoner's text ", h("span", { class: "muted" }, truncate(st.reasoner.replace(/\s+/g, " "), 70))),
        h("pre", { class: "txt" }, st.reasoner)) : null,
      h("div", { class: "avis-memory" }, h("span", { class: "muted small" }, "memory "), memoryChips(rec.after, pushed),
        h("span", { class: "change " + rec.change.split(" ")[0] }, rec.change)));
    var cls = "avis-step" + (st.backtrack ? " backtracked" : "") + (st.error_kind ? " has-error" : "") +
      (st.verdict && VERDICTS[st.verdict] ? " v-" + VERDICTS[st.verdict].cls : "") + (rec.ended ? " final" : "");
    return h("div", { class: cls, "data-step": st.index, "data-state": st.state || "", "data-tool": st.tool || "", "data-phase": phase },
      head, h("div", { class: "avis-grid" }, plan, act, reason),
      rec.ended ? h("div", { class: "avis-ends" }, "the run ends here: ", h("b", { class: "mono" }, String(st.finish))) : null,
      h("details", { class: "line-more" }, h("summary", {}, "step details"), renderStep(st, geo, agent)));
  }

  function renderAvisAnswer(st, geo, agent) {
    var forced = !!st.forced;
    return h("div", { class: "avis-step avis-answer" + (forced ? " forced" : ""), "data-step": st.index, "data-tool": "ANSWER" },
      h("div", { class: "avis-head" }, h("span", { class: "step-no" }, "#" + st.index),
        h("span", { class: "tool mono" }, "ANSWER"),
        forced ? h("span", { class: "badge warn" }, "forced") : null,
        st.error_kind ? h("span", { class: "badge err" }, st.error_kind) : null,
        h("span", { class: "grow" }),
        h("span", { class: "metric" }, "llm " + secs(st.llm_latency_s))),
      h("div", { class: "avis-answer-body" },
        h("div", { class: "avis-forced-note" }, forced ? "answered from the best evidence (every path exhausted / budget spent)" : "answered"),
        isFinish(st) ? h("div", { class: "avis-extracted" }, h("span", { class: "muted small" }, "answer "), h("b", { class: "mono" }, String(st.finish))) : null,
        st.error ? h("div", { class: "row error" }, h("span", { class: "tag" }, "Error"), h("div", { class: "txt" }, st.error)) : null,
        avisObservation(st.observation),
        hasText(st.reasoner) ? h("details", { class: "avis-reasoner" }, h("summary", {}, "reasoner's text"), h("pre", { class: "txt" }, st.reasoner)) : null),
      h("details", { class: "line-more" }, h("summary", {}, "step details"), renderStep(st, geo, agent)));
  }

  function renderAvis(t, geo) {
    var steps = t.steps || [], decomp = null, context = null, actions = [], answer = null, others = [];
    steps.forEach(function (st) {
      if (st.tool === "ANSWER") answer = st;
      else if (typeof st.state === "string") actions.push(st);
      else if (st.tool === "DECOMPOSE" && !decomp) decomp = st;
      else if (st.tool === "CONTEXT" && !context) context = st;
      else others.push(st);
    });
    var flow = avisFlow(actions);
    // the visual phase ends at the first answer the reasoner drew; the next query is the
    // knowledge sub-question with that answer in place of '#'
    var vi = -1;
    flow.forEach(function (r, i) { if (vi < 0 && hasText(r.st.extracted) && r.st.verdict !== "not_informative") vi = i; });
    var visual = vi >= 0 ? flow[vi] : null, filled = null;
    var kq = decomp && decomp.output && typeof decomp.output === "object" ? decomp.output.knowledge : null;
    if (visual) {
      var nextQ = null;
      for (var k = vi + 1; k < flow.length && nextQ === null; k++) if (stepQuery(flow[k].st) !== null) nextQ = flow[k];
      if (nextQ) filled = { text: stepQuery(nextQ.st), asked: true, step: nextQ.st };
      else if (hasText(kq) && kq.indexOf("#") >= 0) filled = { text: kq.split("#").join(visual.st.extracted), asked: false };
    }
    var counts = { not_informative: 0, informative: 0, answerable: 0 }, backs = 0, calls = 0;
    actions.forEach(function (st) {
      if (counts[st.verdict] !== undefined) counts[st.verdict] += 1;
      if (st.backtrack) backs += 1;
      calls += (typeof st.calls === "number" ? st.calls : 1) + (st.tool_calls || 0);
    });
    var rows = flow.map(function (r, i) { return renderAvisStep(r, geo, t.agent, visual === null || i <= vi ? "visual" : "knowledge"); });
    if (answer) rows.push(renderAvisAnswer(answer, geo, t.agent));
    var ender = answer || (flow.length && flow[flow.length - 1].ended ? flow[flow.length - 1].st : null);
    var final = t.answer != null ? String(t.answer) : (ender && isFinish(ender) ? String(ender.finish) : null);
    var how = !ender ? "the run ended without an answer (" + (t.status || "?") + ")"
      : ender.tool === "ANSWER" ? (ender.forced ? "answered from the best evidence (every path exhausted / budget spent)" : "answered at step #" + ender.index)
        : "answerable at step #" + ender.index + " (" + (ender.tool || "?") + ")";
    return h("div", { class: "avis" },
      renderAvisQuestions(decomp, visual, filled, geo, t.agent),
      context ? renderAvisContext(context, geo, t.agent) : null,
      h("div", { class: "avis-actions" },
        h("div", { class: "section-head" }, h("span", { class: "section-label" }, "Plan, act, reason"),
          h("span", { class: "muted small" }, plural(actions.length, "action") + " · " + plural(backs, "backtrack") + " · " +
            counts.not_informative + " not informative, " + counts.informative + " informative, " + counts.answerable + " answerable · " +
            plural(calls, "model call"))),
        rows.length ? h("div", { class: "avis-steps" }, rows) : h("p", { class: "muted small" }, "No actions were taken.")),
      others.length ? h("div", { class: "steps" }, others.map(function (st) { return renderStep(st, geo, t.agent); })) : null,
      h("div", { class: "avis-final" + (final === null ? " none" : "") },
        h("span", { class: "section-label" }, "Answer"),
        h("b", { class: "mono avis-final-answer" }, final === null ? "—" : final),
        h("span", { class: "muted small avis-final-how" }, how)));
  }

  function renderTrace(t, geo, top) {
    var steps = t.steps || [];
    var status = t.status || "";
    var summaryEl = h("summary", {},
      h("span", { class: "agent-name" }, t.agent || "agent"),
      h("span", { class: "badge " + (status === "finished" ? "ok" : "warn") }, status),
      h("span", { class: "muted small" }, steps.length + " step" + (steps.length === 1 ? "" : "s")),
      t.latency_s ? h("span", { class: "muted small" }, secs(t.latency_s)) : null,
      t.answer != null ? h("span", { class: "agent-answer" }, "→ ", h("b", {}, String(t.answer))) : null);
    var block = h("details", { class: "agent-block" + (top ? " top" : ""), "data-agent": t.agent || "", open: true }, summaryEl);
    if (!top && t.question) add(block, h("div", { class: "child-q" }, h("span", { class: "tag" }, "Asked"), h("span", {}, t.question)));
    if (!top && t.inputs && hasVisual(t.inputs)) {
      add(block, h("div", { class: "row args" }, h("span", { class: "tag" }, "Inputs"), h("div", { class: "vals" },
        Object.keys(t.inputs).map(function (k) { return h("div", { class: "val-block" }, h("div", { class: "var mono" }, k), renderValue(t.inputs[k], geo, k)); }))));
    }
    if (t.error) add(block, h("div", { class: "row error" }, h("span", { class: "tag" }, "Error"), h("div", { class: "txt" }, t.error)));
    add(block, isProgramTrace(t) ? renderProgram(t, geo)
      : isAvisTrace(t) ? renderAvis(t, geo)
        : h("div", { class: "steps" }, steps.map(function (st) { return renderStep(st, geo, t.agent); })));
    return block;
  }

  /** A multiple-choice question's options (from the API: `options`, `chosen_option`,
   * `correct_option`), the chosen and the correct one marked; null for an open question. */
  function renderOptions(rec, truth) {
    var opts = Array.isArray(rec.options) ? rec.options.filter(isObj) : [];
    if (!opts.length) return null;
    var chosen = rec.chosen_option == null ? null : String(rec.chosen_option);
    var correct = truth && rec.correct_option != null ? String(rec.correct_option) : null;
    var items = opts.map(function (o) {
      var letter = String(o.letter), isChosen = letter === chosen, isRight = letter === correct;
      var cls = "option" + (isChosen ? " chosen" : "") + (isRight ? " correct" : "") +
        (isChosen && correct !== null && !isRight ? " wrong" : "");
      return h("li", { class: cls, "data-letter": letter },
        h("span", { class: "opt-letter" }, letter + "."),
        h("span", { class: "opt-text" }, o.text == null ? "" : String(o.text)),
        isChosen ? h("span", { class: "opt-mark mark-chosen", title: "the option the prediction chooses" }, "chosen") : null,
        isRight ? h("span", { class: "opt-mark mark-correct", title: "the correct option" }, "correct") : null);
    });
    var note = null;
    if (chosen === null) {
      note = rec.prediction == null ? "no prediction" : "the prediction names no option";
    } else if (truth && correct === null) {
      note = "the correct option is not known";
    }
    return h("div", { class: "options-box" },
      h("ol", { class: "options", id: "options" }, items),
      note ? h("div", { class: "muted small", id: "options-note" }, note) : null);
  }

  /** " · the option's text" after a letter that names one of the options, else null. */
  function optionTextOf(rec, letter) {
    var opts = Array.isArray(rec.options) ? rec.options.filter(isObj) : [];
    var o = opts.filter(function (x) { return letter != null && String(x.letter) === String(letter); })[0];
    return o && o.text != null ? h("span", { class: "opt-of muted" }, " · " + String(o.text)) : null;
  }

  function viewSample(run, dataset, id) {
    setCrumbs([{ text: "Runs", href: "#/" }, { text: run, href: "#/run/" + enc(run) }, { text: dataset + " / " + id }]);
    return api.sample(run, dataset, id).then(function (rec) {
      var trace = rec.trace || null;
      var geo = collectGeometry(trace);
      var truth = hasTruth(rec);
      var right = isCorrect(rec.score);
      var verdict = !truth ? h("span", { class: "verdict muted no-truth" }, "not scored: " + NO_TRUTH)
        : typeof rec.score === "number"
          ? h("span", { class: "verdict " + (right ? "right" : "wrong") }, right ? "✓ right" : "✗ wrong")
          : h("span", { class: "verdict muted" }, "not scored");
      var answers = Array.isArray(rec.answers) ? rec.answers : (rec.answers == null ? [] : [rec.answers]);
      var meta = h("div", { class: "meta" },
        h("span", {}, "type ", h("b", {}, rec.question_type || "–")),
        h("span", {}, "status ", h("b", {}, rec.status || "–")),
        h("span", {}, "latency ", h("b", {}, secs(rec.latency_s))),
        h("span", {}, "tokens ", h("b", {}, (rec.prompt_tokens || 0) + " → " + (rec.completion_tokens || 0))),
        h("span", {}, "LLM calls ", h("b", {}, rec.llm_calls == null ? "–" : rec.llm_calls)),
        trace && trace.model ? h("span", {}, "model ", h("b", {}, trace.model)) : null);
      var card = h("section", { class: "card sample-head" },
        h("div", { class: "question" }, rec.question || ""),
        renderOptions(rec, truth),
        h("div", { class: "answers" },
          h("div", { class: "ans pred" + (!truth ? " unscored" : right ? " right" : " wrong"), id: "prediction" },
            h("div", { class: "label" }, "Prediction"), h("div", { class: "value" }, rec.prediction == null ? "—" : String(rec.prediction)), verdict),
          h("div", { class: "ans gt" + (truth ? "" : " none"), id: "ground-truth" },
            h("div", { class: "label" }, "Ground truth"),
            truth ? h("div", { class: "value" }, answersText(answers) || "—",
              answersText(answers).replace(/[\s().]/g, "").toUpperCase() === String(rec.correct_option) ? optionTextOf(rec, rec.correct_option) : null)
              : h("div", { class: "value muted no-truth" }, NO_TRUTH)),
          truth ? h("div", { class: "ans score" }, h("div", { class: "label" }, "Score"), h("div", { class: "value" }, scoreBadge(rec.score))) : null),
        rec.judge ? h("div", { class: "row judge", id: "judge" }, h("span", { class: "tag" }, "Judge"),
          h("span", { class: "judge-value" }, typeof rec.judge === "string" ? rec.judge : JSON.stringify(rec.judge))) : null,
        rec.error ? h("div", { class: "row error" }, h("span", { class: "tag" }, "Error"), h("div", { class: "txt" }, rec.error)) : null,
        meta);
      var inputs = trace && trace.inputs ? trace.inputs : {};
      var inputsEl = Object.keys(inputs).length ? h("section", { class: "card inputs" }, h("h2", {}, "Inputs"),
        h("div", { class: "vals" }, Object.keys(inputs).map(function (k) {
          var shown = k === "point" && geo.point && isPoint(inputs[k])
            ? h("span", { class: "point-val" }, h("span", { class: "point-swatch", "aria-hidden": "true" }),
              h("span", { class: "mono val" }, pointText(inputs[k])), geo.root ? h("span", { class: "muted small" }, " marked on the image") : null)
            : renderValue(inputs[k], geo, k);
          return h("div", { class: "val-block" }, h("div", { class: "var mono" }, k), shown);
        }))) : null;
      var memCounts = retrievedCounts(trace);
      var memText = countsText(memCounts);
      var traceEl = trace ? h("section", { class: "card trace" }, h("h2", {}, "Trace",
        memText ? h("span", { class: "badge memory", id: "memory-summary" }, memText + " in " + plural(memCounts.steps, "step")) : null,
        h("span", { class: "tools" },
          h("button", { type: "button", on: { click: function () { toggleAll(true); } } }, "expand all"),
          h("button", { type: "button", on: { click: function () { toggleAll(false); } } }, "collapse agents"))),
        renderTrace(trace, geo, true)) : h("p", { class: "muted" }, "No trace stored for this sample.");
      function toggleAll(open) {
        document.querySelectorAll(".trace .agent-block:not(.top)").forEach(function (d) { d.open = open; });
      }
      return [h("div", { class: "toolbar" }, h("h1", {}, dataset + " / " + id)), card, inputsEl, traceEl];
    });
  }

  // -- view 4: compare two runs -------------------------------------------------------------

  function viewCompare(a, b, params) {
    setCrumbs([{ text: "Runs", href: "#/" }, { text: "compare " + a + " vs " + b }]);
    var only = params.only === "all" ? "all" : "differ";
    var offset = Math.max(0, parseInt(params.offset || "0", 10) || 0);
    function go(p) {
      var next = Object.assign({ only: only, offset: offset }, p);
      if (!next.offset) delete next.offset;
      window.location.hash = "#/compare/" + enc(a) + "/" + enc(b) + qs(next);
    }
    return api.compare(a, b, { offset: offset, limit: PAGE, only: only }).then(function (page) {
      function side(run, x, it) {
        if (!x) return h("td", { class: "muted" }, "not in this run");
        var href = "#/run/" + enc(run) + "/sample/" + enc(it.dataset) + "/" + enc(it.sample_id);
        var truth = hasTruth(it);
        return h("td", { class: "side" + (!truth ? "" : isCorrect(x.score) ? " right" : " wrong") },
          h("a", { href: href }, x.prediction == null ? "—" : truncate(x.prediction, 50)), " ", scoreBadge(x.score, truth),
          x.status && x.status !== "finished" && x.status !== "ok" ? h("span", { class: "badge warn" }, x.status) : null);
      }
      var rows = (page.items || []).map(function (it) {
        var differ = !it.a || !it.b || it.a.score !== it.b.score;
        return h("tr", { class: "compare-row" + (differ ? " differ" : "") },
          h("td", { class: "small" }, it.dataset, h("div", { class: "muted" }, it.sample_id)),
          h("td", { class: "question", title: it.question }, truncate(it.question, 90)),
          h("td", { class: "gt" }, truncate(answersText(it.answers), 40)),
          side(a, it.a, it), side(b, it.b, it));
      });
      var total = page.total || 0, first = total ? offset + 1 : 0, last = Math.min(offset + PAGE, total);
      var cb = h("input", { type: "checkbox", id: "filter-differ", checked: only === "differ",
        on: { change: function () { go({ only: cb.checked ? "differ" : "all", offset: 0 }); } } });
      return [
        h("div", { class: "toolbar" }, h("h1", {}, "Compare"),
          h("span", { class: "run-stats" }, h("span", {}, "A ", h("b", {}, a)), h("span", {}, "B ", h("b", {}, b)))),
        h("div", { class: "filters" }, h("label", { class: "filter check" }, cb, h("span", {}, "only where they differ"))),
        h("div", { class: "table-wrap" }, h("table", { class: "grid compare" },
          h("thead", {}, h("tr", {}, h("th", {}, "Sample"), h("th", {}, "Question"), h("th", {}, "Ground truth"),
            h("th", {}, "A · " + a), h("th", {}, "B · " + b))),
          h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", { colspan: 5, class: "muted empty" }, "No samples.")))),
        ),
        h("div", { class: "pager" },
          h("button", { id: "page-prev", type: "button", disabled: offset <= 0, on: { click: function () { go({ offset: Math.max(0, offset - PAGE) }); } } }, "‹ Prev"),
          h("span", { id: "page-info" }, first + "–" + last + " of " + total),
          h("button", { id: "page-next", type: "button", disabled: offset + PAGE >= total, on: { click: function () { go({ offset: offset + PAGE }); } } }, "Next ›")),
      ];
    });
  }

  // -- start -------------------------------------------------------------------------------

  document.getElementById("mode").textContent = STATIC ? "static report" : "";
  window.addEventListener("hashchange", route);
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", route);
  else route();
})();
