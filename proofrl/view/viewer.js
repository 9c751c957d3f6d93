/* proofrl view: draws a search run's theorems and AND-OR trees from the JSON embedded in the page.
 * Rows are built only when their parent is expanded (a tree of 10,000 nodes starts as a few dozen rows), and
 * a node's children are added a page at a time. Fields this script does not know are shown as they are. */
(function () {
  "use strict";
  var DATA = JSON.parse(document.getElementById("proofrl-data").textContent);
  var PAGE = 100;            // children rows added per click on "more"
  var EXPAND_ALL = 2000;     // rows "expand all" adds at most
  var NODE_KNOWN = ["id", "kind", "focus_depth", "depth", "goals", "fingerprint", "counts", "tactics", "visits",
    "value_sum", "value", "estimate", "evaluations", "priority", "solved", "closes", "dead", "unsound", "parents",
    "children"];
  var EDGE_KNOWN = ["id", "src", "dst", "kind", "tactic", "aliases", "logprob_sum", "logprob_mean", "prior_raw",
    "focus_index", "visits", "value_sum", "value", "seconds", "failure", "c", "prior", "Q", "U", "score"];

  // -- small helpers ----------------------------------------------------------------------------------------
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function num(x) {
    if (x === null || x === undefined) return "–";
    if (typeof x !== "number") return String(x);
    if (Number.isInteger(x)) return String(x);
    var a = Math.abs(x);
    return (a !== 0 && (a < 1e-3 || a >= 1e5)) ? x.toExponential(2) : String(+x.toPrecision(3));
  }
  function short(s, n) { s = String(s); return s.length > n ? s.slice(0, n - 1) + "…" : s; }
  function show(x) {
    if (x === null || x === undefined) return "–";
    if (typeof x === "object") return JSON.stringify(x, null, 1);
    return typeof x === "number" ? num(x) : String(x);
  }
  function stat(label, value) { return el("span", "st", label + " " + num(value)); }
  function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); return e; }

  // -- one theorem's tree, indexed ------------------------------------------------------------------------
  function Tree(t) {
    var tree = t.tree || {}, self = this;
    this.nodes = new Map(); this.edges = new Map();
    (Array.isArray(tree.nodes) ? tree.nodes : []).forEach(function (n) {
      if (n && n.id !== undefined) self.nodes.set(n.id, n);
    });
    (Array.isArray(tree.edges) ? tree.edges : []).forEach(function (e) {
      if (e && e.id !== undefined) self.edges.set(e.id, e);
    });
    this.out = new Map(); this.into = new Map();
    this.nodes.forEach(function (n, id) {
      if (Array.isArray(n.children)) self.out.set(id, n.children.slice());
      if (Array.isArray(n.parents)) self.into.set(id, n.parents.slice());
    });
    this.edges.forEach(function (e, id) {  // an export without children / parents lists still draws
      if (!self.out.has(e.src)) self.out.set(e.src, []);
      var listed = Array.isArray((self.nodes.get(e.src) || {}).children);
      if (!listed && self.out.get(e.src).indexOf(id) < 0) self.out.get(e.src).push(id);
      if (e.dst !== null && e.dst !== undefined) {
        if (!self.into.has(e.dst)) self.into.set(e.dst, []);
        listed = Array.isArray((self.nodes.get(e.dst) || {}).parents);
        if (!listed && self.into.get(e.dst).indexOf(id) < 0) self.into.get(e.dst).push(id);
      }
    });
    this.root = tree.root !== undefined ? tree.root : (this.nodes.size ? this.nodes.keys().next().value : null);
    this.proof = new Set(Array.isArray(tree.solution) ? tree.solution : []);
    this.dropped = Array.isArray(tree.dropped) ? tree.dropped : [];
  }
  Tree.prototype.pathTo = function (nodeId) {  // edge ids from the root, through each node's first parent
    var path = [], seen = new Set(), cur = nodeId;
    while (cur !== this.root && !seen.has(cur)) {
      seen.add(cur);
      var ins = this.into.get(cur) || [], e = null;
      for (var i = 0; i < ins.length && !e; i++) { if (this.edges.has(ins[i])) e = this.edges.get(ins[i]); }
      if (!e) return null;
      path.unshift(e.id); cur = e.src;
    }
    return cur === this.root ? path : null;
  };

  function goalText(n) {
    var g = Array.isArray(n.goals) ? n.goals : [];
    if (!g.length) return n.closes ? "no goals" : "(no goals listed)";
    var lines = String(g[0]).split("\n"), concl = lines[lines.length - 1];
    return concl + (g.length > 1 ? "   (+" + (g.length - 1) + " goal" + (g.length > 2 ? "s" : "") + ")" : "");
  }
  function deadReason(n) {
    if (typeof n.dead === "string") return n.dead;
    if (n.dead && typeof n.dead === "object") return n.dead.reason || JSON.stringify(n.dead);
    var keys = ["dead_reason", "why_dead", "reason", "unsound"];
    for (var i = 0; i < keys.length; i++) if (n[keys[i]]) return show(n[keys[i]]);
    return "";
  }
  function extras(obj, known, into) {  // unknown fields: true flags as badges, other values as key=value
    Object.keys(obj).forEach(function (k) {
      if (known.indexOf(k) >= 0 || k === "dead_reason" || k === "why_dead") return;
      if (obj[k] === null || obj[k] === false) return;
      if (obj[k] === true) into.appendChild(el("span", "flag other", k));
      else into.appendChild(el("span", "st", k + "=" + short(show(obj[k]), 60)));
    });
  }

  // -- page skeleton -----------------------------------------------------------------------------------------
  var theorems = Array.isArray(DATA.theorems) ? DATA.theorems : [];
  var header = el("header"), app = el("div"), list = el("nav"), main = el("main"), detail = el("aside");
  app.id = "app"; list.id = "list"; main.id = "main"; detail.id = "detail";
  document.body.appendChild(header); document.body.appendChild(app);
  app.appendChild(list); app.appendChild(main); app.appendChild(detail);

  (function drawHeader() {
    header.appendChild(el("h1", null, "proofrl search · " + (DATA.title || "")));
    var counts = {};
    theorems.forEach(function (t) { counts[t.status] = (counts[t.status] || 0) + 1; });
    var algos = Array.from(new Set(theorems.map(function (t) { return t.algorithm; }).filter(Boolean)));
    var parts = [theorems.length + (theorems.length === 1 ? " theorem" : " theorems")];
    Object.keys(counts).sort().forEach(function (k) { parts.push(counts[k] + " " + k); });
    if (algos.length) parts.push("algorithm " + algos.join(", "));
    var s = DATA.summary && DATA.summary.time;
    if (s && typeof s.search_seconds === "number") {
      parts.push("search " + num(s.search_seconds) + " s: prover " + num(s.prover_seconds) + " s, model " +
        num(s.model_seconds) + " s, outside both " + num(s.outside_seconds) + " s (" +
        num(100 * (s.outside_share || 0)) + " %)");
    }
    header.appendChild(el("div", "summary", parts.join(" · ")));
    if (Array.isArray(DATA.problems) && DATA.problems.length) {
      header.appendChild(el("div", "problems", "unreadable: " + DATA.problems.join("; ")));
    }
  })();

  // -- theorem list --------------------------------------------------------------------------------------------
  var filter = el("input");
  filter.type = "search"; filter.placeholder = "filter theorems"; filter.setAttribute("aria-label", "filter theorems");
  list.appendChild(filter);
  var listBox = el("div"); list.appendChild(listBox);
  var buttons = [];
  theorems.forEach(function (t, i) {
    var b = el("button", "th"); b.type = "button";
    b.appendChild(el("span", "dot " + t.status)); b.appendChild(el("span", "mono", short(t.name, 40)));
    b.appendChild(el("span", "n", t.status + (t.nodes ? " · " + t.nodes : "")));
    b.title = t.name + ": " + t.status + (t.reason ? " (" + t.reason + ")" : "");
    b.addEventListener("click", function () { select(i); });
    listBox.appendChild(b); buttons.push(b);
  });
  filter.addEventListener("input", function () {
    var q = filter.value.toLowerCase();
    theorems.forEach(function (t, i) {
      buttons[i].hidden = q !== "" && (t.name + " " + t.status).toLowerCase().indexOf(q) < 0;
    });
  });

  // -- one theorem -------------------------------------------------------------------------------------------
  var current = null;  // {t, tree, box, rootItem, index}
  var fieldsBox = null;  // the node and edge of the row last clicked, above the time table

  function timeTable(time) {
    var box = el("div", "time"), by = (time && time.by_name) || {}, total = time && time.search_seconds;
    var names = Object.keys(by);
    if (!names.length) { box.appendChild(el("div", "st", "no spans in trace.jsonl")); return box; }
    names.sort(function (a, b) { return (by[b].seconds || 0) - (by[a].seconds || 0); });
    var table = el("table"), top = by[names[0]].seconds || 0;
    var head = el("tr");
    ["span", "count", "s", "% of search", ""].forEach(function (h) { head.appendChild(el("th", null, h)); });
    table.appendChild(head);
    names.forEach(function (k) {
      var r = el("tr"), sec = by[k].seconds || 0, bar = el("div", "bar"), cell = el("td");
      r.appendChild(el("td", "mono", k)); r.appendChild(el("td", "num", num(by[k].count)));
      r.appendChild(el("td", "num", num(sec)));
      r.appendChild(el("td", "num", total ? (100 * sec / total).toFixed(1) : "–"));
      bar.style.width = (top ? Math.max(0.5, 70 * sec / top) : 0) + "px"; cell.appendChild(bar); r.appendChild(cell);
      table.appendChild(r);
    });
    box.appendChild(table);
    if (typeof total === "number") {
      box.appendChild(el("div", "st", "prover " + num(time.prover_seconds) + " s · model " + num(time.model_seconds) +
        " s · outside both " + num(time.outside_seconds) + " s (" + num(100 * (time.outside_share || 0)) +
        " % of the search)"));
    }
    return box;
  }

  function select(i) {
    var t = theorems[i];
    if (!t) return;
    buttons.forEach(function (b, j) { b.classList.toggle("sel", i === j); });
    try {
      history.replaceState(null, "", "#theorem=" + encodeURIComponent(t.name));
    } catch (e) { /* refused for file:// pages by some browsers */ }
    clear(main); clear(detail);
    fieldsBox = el("div"); detail.appendChild(fieldsBox);
    fieldsBox.appendChild(el("div", "st", "Click a row to see all of its node's and edge's fields here."));
    var td = el("details"); td.open = true; td.appendChild(el("summary", null, "Where the time went (trace.jsonl)"));
    td.appendChild(timeTable(t.time)); detail.appendChild(td);
    var h = el("h2");
    h.appendChild(el("span", "mono", t.name + " ")); h.appendChild(el("span", "status " + t.status, t.status));
    main.appendChild(h);
    if (t.reason) main.appendChild(el("div", null, t.reason));
    var facts = el("div", "facts");
    ["algorithm", "expansions", "steps", "iterations", "nodes", "failed_edges", "seconds"].forEach(function (k) {
      if (t[k] === undefined || t[k] === null || t[k] === "") return;
      facts.appendChild(el("span", null, k.replace("_", " ") + " " + num(t[k])));
    });
    extras(t, ["name", "status", "proof", "verdict", "reason", "tree", "time", "algorithm", "expansions", "steps",
      "iterations", "nodes", "failed_edges", "seconds"], facts);
    main.appendChild(facts);
    var head = (t.tree && t.tree.search) || {}, thm = head.theorem || {};
    if (thm.statement) {
      main.appendChild(el("h3", null, "Statement"));
      main.appendChild(el("pre", null, (thm.header ? thm.header + "\n" : "") + thm.statement));
    }
    if (t.proof) {
      var verdict = t.verdict && t.verdict.status ? " (final check: " + t.verdict.status + ")" : "";
      main.appendChild(el("h3", null, "Proof" + verdict));
      main.appendChild(el("pre", "proofscript", t.proof));
    }
    if (t.verdict && Array.isArray(t.verdict.reasons) && t.verdict.reasons.length) {
      main.appendChild(el("div", "why", t.verdict.reasons.join("; ")));
    }
    main.appendChild(el("h3", null, "Search tree"));
    var tree = new Tree(t);
    current = { t: t, tree: tree, box: null, index: null };
    if (tree.root === null || !tree.nodes.has(tree.root)) {
      main.appendChild(el("div", "st", "No tree: " + (t.reason || "the search did not start")));
      return;
    }
    drawToolbar(tree);
    var box = el("div", "tree"); current.box = box; main.appendChild(box);
    if (tree.dropped.length) {
      var dd = el("details"), pre = el("pre");
      dd.appendChild(el("summary", null, tree.dropped.length + " dropped edges (self-loops and cycles)"));
      pre.textContent = tree.dropped.slice(0, 500).map(function (d) { return JSON.stringify(d); }).join("\n");
      dd.appendChild(pre); main.appendChild(dd);
    }
    reset();
  }

  // -- the tree ----------------------------------------------------------------------------------------------
  function item(edgeId, nodeId) {  // a row (the edge into the node, then the node) and its lazily filled children
    var tree = current.tree, e = edgeId === null ? null : tree.edges.get(edgeId);
    var n = nodeId === null || nodeId === undefined ? null : tree.nodes.get(nodeId);
    var wrap = el("div", "item"), row = el("div", "row"), tog = el("button", "tog");
    tog.type = "button"; wrap.appendChild(row);
    wrap._edge = edgeId; wrap._node = n ? n.id : null; wrap._kids = null; wrap._shown = 0;
    var kids = n ? (tree.out.get(n.id) || []) : [];
    if (!kids.length) tog.classList.add("leaf");
    tog.textContent = "▸"; tog.setAttribute("aria-label", "expand");
    row.appendChild(tog);
    if (e) {
      if ((edgeId === null ? false : tree.proof.has(edgeId))) row.classList.add("proof");
      var tac = el("code", "tac", short(e.tactic, 160)); tac.title = e.tactic; row.appendChild(tac);
      if (e.kind === "focus") row.appendChild(el("span", "kind", "focus"));
      if (Array.isArray(e.aliases) && e.aliases.length) {
        row.appendChild(el("span", "st", "+" + e.aliases.length + " alias" + (e.aliases.length > 1 ? "es" : "")));
      }
      if (e.prior !== undefined) row.appendChild(stat("P", e.prior)); else row.appendChild(stat("prior", e.prior_raw));
      if (e.logprob_sum !== undefined && e.kind !== "focus") row.appendChild(stat("logp", e.logprob_sum));
      if (e.visits) row.appendChild(stat("N", e.visits));
      if (e.Q !== undefined) row.appendChild(stat("Q", e.Q));
      if (e.U !== undefined) row.appendChild(stat("U", e.U));
      if (e.score !== undefined) row.appendChild(stat("score", e.score));
      extras(e, EDGE_KNOWN, row);
      if (e.failure) {
        row.classList.add("failed");
        var f = e.failure, kind = typeof f === "object" ? (f.kind || "failed") : String(f);
        row.appendChild(el("span", "flag fail", kind));
        if (f.message) { var m = el("span", "why", short(f.message, 140)); m.title = f.message; row.appendChild(m); }
        if (typeof f === "object") extras(f, ["kind", "message"], row);
      }
    } else if (edgeId === null && current.tree.proof.size) {
      row.classList.add("proof");
    }
    if (n) {
      if (e) row.appendChild(el("span", "st", "→"));
      row.appendChild(el("span", "kind " + n.kind, n.kind || "?"));
      row.appendChild(el("span", "st", "#" + n.id));
      var g = el("span", "goal mono", short(goalText(n), 200));
      g.title = (Array.isArray(n.goals) ? n.goals : []).join("\n\n"); row.appendChild(g);
      if (n.visits) row.appendChild(stat("N", n.visits));
      if (n.value !== undefined && n.value !== null) row.appendChild(stat("V", n.value));
      if (n.estimate !== undefined && n.estimate !== null) row.appendChild(stat("v₀", n.estimate));
      if (n.priority !== undefined && n.priority !== null) row.appendChild(stat("priority", n.priority));
      if (n.solved) row.appendChild(el("span", "flag solved", "solved"));
      if (n.closes) row.appendChild(el("span", "flag closes", "closes"));
      if (n.unsound) {  // a closing leaf whose proof the final check refused
        row.classList.add("deadnode");
        row.appendChild(el("span", "flag dead", "unsound"));
        if (typeof n.unsound !== "boolean") row.appendChild(el("span", "why", short(show(n.unsound), 140)));
      }
      if (n.dead) {
        row.classList.add("deadnode");
        row.appendChild(el("span", "flag dead", "dead"));
        var why = deadReason(n);
        if (why && why !== show(n.unsound)) row.appendChild(el("span", "why", short(why, 140)));
      }
      var ins = (tree.into.get(n.id) || []).length;
      if (ins > 1) row.appendChild(el("span", "st", "merged ×" + ins));
      extras(n, NODE_KNOWN.concat(["reason"]), row);
    } else if (e && e.dst !== null && e.dst !== undefined) {
      row.appendChild(el("span", "why", "→ node #" + e.dst + " is not in the export"));
    }
    tog.addEventListener("click", function (ev) { ev.stopPropagation(); toggle(wrap); });
    row.addEventListener("click", function () { focusRow(wrap); });
    return wrap;
  }

  function expand(wrap, upTo) {  // show the children (the first PAGE of them, or up to child index upTo)
    if (wrap._node === null) return 0;
    var kids = current.tree.out.get(wrap._node) || [];
    if (!kids.length) return 0;
    var added = 0;
    if (!wrap._kids) { wrap._kids = el("div", "kids"); wrap.appendChild(wrap._kids); }
    wrap._kids.hidden = false;
    wrap.firstChild.firstChild.textContent = "▾"; wrap.firstChild.firstChild.setAttribute("aria-label", "collapse");
    var want = Math.min(kids.length, Math.max(wrap._shown, PAGE, upTo === undefined ? 0 : upTo + 1));
    if (wrap._more) { wrap._more.remove(); wrap._more = null; }
    for (; wrap._shown < want; wrap._shown++, added++) {
      var eid = kids[wrap._shown], e = current.tree.edges.get(eid);
      wrap._kids.appendChild(item(eid, e ? e.dst : null));
    }
    if (wrap._shown < kids.length) {
      var left = kids.length - wrap._shown;
      var more = el("button", "more", "show " + Math.min(PAGE, left) + " more of " + left);
      more.type = "button";
      more.addEventListener("click", function () { expand(wrap, wrap._shown + PAGE - 1); });
      wrap._kids.appendChild(more); wrap._more = more;
    }
    return added;
  }
  function collapse(wrap) {
    if (wrap._kids) wrap._kids.hidden = true;
    wrap.firstChild.firstChild.textContent = "▸"; wrap.firstChild.firstChild.setAttribute("aria-label", "expand");
  }
  function isOpen(wrap) { return wrap._kids && !wrap._kids.hidden; }
  function toggle(wrap) { if (isOpen(wrap)) collapse(wrap); else expand(wrap); }
  function childItems(wrap) {
    if (!wrap._kids) return [];
    return Array.prototype.filter.call(wrap._kids.children, function (c) { return c.classList.contains("item"); });
  }

  function reset() {  // the root, and the found proof opened
    clear(current.box);
    var root = item(null, current.tree.root); current.box.appendChild(root); current.rootItem = root;
    expand(root);
    if (current.tree.proof.size) openProof(root, 0); else focusRow(root, true);
  }
  function openProof(wrap, depth) {
    if (depth > 500) return;
    expand(wrap);
    childItems(wrap).forEach(function (c) {
      if (c._edge !== null && current.tree.proof.has(c._edge)) openProof(c, depth + 1);
    });
  }
  function expandAll() {
    var budget = EXPAND_ALL, queue = [current.rootItem];
    while (queue.length && budget > 0) {
      var w = queue.shift();
      budget -= expand(w, w._shown + budget);
      queue.push.apply(queue, childItems(w));
    }
    return budget <= 0;
  }

  function reveal(nodeId, edgeId) {  // open the rows down to a node (through first parents) and show it
    var tree = current.tree, path = tree.pathTo(nodeId);
    if (path === null) return false;
    var w = current.rootItem;
    for (var i = 0; i < path.length; i++) {
      var kids = tree.out.get(w._node) || [], at = kids.indexOf(path[i]);
      expand(w, at);
      w = childItems(w).filter(function (c) { return c._edge === path[i]; })[0];
      if (!w) return false;
    }
    if (edgeId !== undefined && edgeId !== null) {
      var k = tree.out.get(w._node) || [];
      expand(w, k.indexOf(edgeId));
      var target = childItems(w).filter(function (c) { return c._edge === edgeId; })[0];
      if (target) w = target;
    }
    Array.prototype.forEach.call(current.box.querySelectorAll(".row.hit"), function (r) { r.classList.remove("hit"); });
    w.firstChild.classList.add("hit");
    focusRow(w);
    w.firstChild.scrollIntoView({ block: "center" });
    return true;
  }

  function focusRow(wrap, quiet) {
    Array.prototype.forEach.call(current.box.querySelectorAll(".row.cur"), function (r) { r.classList.remove("cur"); });
    wrap.firstChild.classList.add("cur");
    if (quiet) return;
    var box = clear(fieldsBox);
    var tree = current.tree, n = tree.nodes.get(wrap._node);
    var e = wrap._edge === null ? null : tree.edges.get(wrap._edge);
    if (n) {
      box.appendChild(el("h3", null, "Node #" + n.id + " (" + (n.kind || "?") + ")"));
      (Array.isArray(n.goals) ? n.goals : []).forEach(function (g, i) {
        box.appendChild(el("div", "st", "goal " + (i + 1))); box.appendChild(el("pre", null, g));
      });
      if (Array.isArray(n.tactics) && n.tactics.length) {
        box.appendChild(el("div", "st", "tactics from the start"));
        box.appendChild(el("pre", null, n.tactics.join("\n")));
      }
      box.appendChild(fields(n, ["goals", "tactics"]));
    }
    if (e) {
      box.appendChild(el("h3", null, "Edge #" + e.id + (e.failure ? " (failed)" : "")));
      box.appendChild(el("pre", null, e.tactic));
      box.appendChild(fields(e, ["tactic"]));
    }
  }
  function fields(obj, skip) {
    var table = el("table");
    Object.keys(obj).forEach(function (k) {
      if (skip.indexOf(k) >= 0) return;
      var r = el("tr"), v = obj[k];
      r.appendChild(el("td", null, k));
      var cell = el("td", typeof v === "object" && v !== null ? "mono" : null, short(show(v), 4000));
      r.appendChild(cell); table.appendChild(r);
    });
    return table;
  }

  // -- search within the tree ------------------------------------------------------------------------------
  function drawToolbar(tree) {
    var bar = el("div", "toolbar"), q = el("input"), msg = el("span", "msg"), hits = el("div", "hits");
    q.type = "search"; q.placeholder = "search goals, tactics, failures, #id";
    q.setAttribute("aria-label", "search the tree");
    var proofBtn = el("button", null, "show proof"), collapseBtn = el("button", null, "collapse all");
    var allBtn = el("button", null, "expand all");
    [proofBtn, collapseBtn, allBtn].forEach(function (b) { b.type = "button"; });
    proofBtn.disabled = !tree.proof.size;
    proofBtn.addEventListener("click", function () {
      reset();
      var p = current.box.querySelector(".row.proof");
      if (p) p.scrollIntoView({ block: "center" });
    });
    collapseBtn.addEventListener("click", function () {
      clear(current.box);
      var root = item(null, tree.root);
      current.box.appendChild(root); current.rootItem = root; expand(root);
    });
    allBtn.addEventListener("click", function () {
      msg.textContent = expandAll() ? "stopped after " + EXPAND_ALL + " rows: open the rest by hand or search" : "";
    });
    [q, proofBtn, collapseBtn, allBtn, msg].forEach(function (x) { bar.appendChild(x); });
    var sizes = tree.nodes.size + " node" + (tree.nodes.size === 1 ? "" : "s") + ", " +
      tree.edges.size + " edge" + (tree.edges.size === 1 ? "" : "s");
    bar.appendChild(el("span", "legend",
      sizes + " · P prior, logp Σ log-prob, N visits, Q/U PUCT terms, V mean value, v₀ first estimate"));
    main.appendChild(bar); main.appendChild(hits);
    var timer = null;
    q.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(function () { search(q.value, hits, msg); }, 150);
    });
    q.addEventListener("keydown", function (ev) {
      var b = ev.key === "Enter" ? hits.querySelector("button") : null;
      if (b) b.click();
    });
  }
  function index(tree) {
    if (current.index) return current.index;
    var items = [];
    tree.nodes.forEach(function (n) {
      var goals = Array.isArray(n.goals) ? n.goals.join("\n") : "";
      items.push({ node: n.id, text: ("#" + n.id + " " + goals + " " + deadReason(n)).toLowerCase(),
        label: "#" + n.id + " " + goalText(n) });
    });
    tree.edges.forEach(function (e) {
      var f = e.failure ? " " + (e.failure.kind || "") + " " + (e.failure.message || "") : "";
      var text = String(e.tactic) + " " + (e.aliases || []).join(" ") + f;
      items.push({ node: e.src, edge: e.id, text: text.toLowerCase(),
        label: e.tactic + (e.failure ? "  [" + (e.failure.kind || "failed") + "]" : "") + "  (from #" + e.src + ")" });
    });
    current.index = items;
    return items;
  }
  function search(query, hits, msg) {
    clear(hits);
    var q = query.trim().toLowerCase();
    if (!q) { msg.textContent = ""; return; }
    var found = index(current.tree).filter(function (it) {
      if (/^#\d+$/.test(q)) return it.edge === undefined && it.text.indexOf(q + " ") === 0;  // a node by its id
      return it.text.indexOf(q) >= 0;
    });
    msg.textContent = found.length + " match" + (found.length === 1 ? "" : "es");
    found.slice(0, 100).forEach(function (it) {
      var b = el("button", "mono", short(it.label, 160)); b.type = "button";
      b.addEventListener("click", function () {
        if (!reveal(it.node, it.edge)) msg.textContent = "not reachable from the root";
      });
      hits.appendChild(b);
    });
    if (found.length > 100) hits.appendChild(el("div", "st", "first 100 shown"));
  }

  // -- start -------------------------------------------------------------------------------------------------
  var start = 0, want = decodeURIComponent((location.hash.match(/theorem=([^&]*)/) || [])[1] || "");
  theorems.forEach(function (t, i) { if (want && t.name === want) start = i; });
  if (!want) theorems.some(function (t, i) { if (t.status === "proved") { start = i; return true; } return false; });
  if (theorems.length) select(start); else main.appendChild(el("div", null, "This run has no results yet."));
  document.documentElement.setAttribute("data-ready-ms", String(Math.round(performance.now())));
})();
