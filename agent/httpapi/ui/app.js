// herd dashboard: lists the fleet from the agent's /v1 API, then follows
// its watch streams (every object kind, and the events) and redraws. It
// only reads. Everything from the API goes into the page as textContent,
// never as markup.
"use strict";

(function () {
  const KINDS = ["nodes", "pods", "services", "deployments", "daemons"];
  const MAX_TIMELINE = 200;
  const state = { objs: {}, events: new Map(), warnings: {}, status: null };
  for (const k of KINDS) state.objs[k] = new Map();

  // el builds an element: attrs are set as attributes (data-*, class),
  // children are elements or strings (text nodes).
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== undefined && v !== null) e.setAttribute(k, String(v));
    }
    for (const c of children) {
      if (c === null || c === undefined || c === "") continue;
      e.append(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
    }
    return e;
  }

  function setConn(st, text) {
    const c = document.getElementById("conn");
    c.dataset.state = st;
    c.textContent = text;
  }

  // ---- reading the API ----

  async function getJSON(path) {
    const r = await fetch(path, { credentials: "same-origin", cache: "no-store" });
    if (!r.ok) {
      let msg = r.status + " " + r.statusText;
      try { const b = await r.json(); if (b && b.message) msg = b.message; } catch (e) { /* not JSON */ }
      const err = new Error(path + ": " + msg);
      err.status = r.status;
      throw err;
    }
    return r.json();
  }

  // watch reads an NDJSON stream of api.WatchEvent, calling onEvent for
  // each; it resolves when the stream ends and rejects on errors.
  async function watch(path, signal, onEvent) {
    const r = await fetch(path, { credentials: "same-origin", cache: "no-store", signal });
    if (!r.ok) {
      const err = new Error(path + ": " + r.status);
      err.status = r.status;
      throw err;
    }
    const reader = r.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i).trim();
        buf = buf.slice(i + 1);
        if (line === "") continue; // heartbeat
        if (onEvent(JSON.parse(line)) === false) return;
      }
    }
  }

  // apply folds one watch event into m; false means relist.
  function apply(m, ev) {
    if (ev.type === "RELIST") return false;
    const o = ev.object;
    if (!o || !o.metadata) return true;
    const cur = m.get(o.metadata.name);
    if (cur && (cur.metadata.resourceVersion || 0) > ev.resourceVersion) return true; // replayed
    if (ev.type === "DELETED") m.delete(o.metadata.name);
    else m.set(o.metadata.name, o);
    return true;
  }

  // follow keeps one list-then-watch loop going, with backoff after a
  // failure or a RELIST. list fills the state and returns the
  // resourceVersion to watch from; url(rv) is the watch's path.
  function follow(name, list, url, onEvent) {
    let delay = 500;
    const loop = async () => {
      for (;;) {
        const ctl = new AbortController();
        try {
          const rv = await list();
          setLive(name, true);
          render();
          delay = 500;
          await watch(url(rv), ctl.signal, (ev) => {
            const ok = onEvent(ev);
            schedule();
            return ok;
          });
        } catch (e) {
          console.warn("herd dashboard:", name, e && e.message);
        }
        ctl.abort();
        setLive(name, false);
        await new Promise((res) => setTimeout(res, delay));
        delay = Math.min(delay * 2, 15000);
      }
    };
    loop();
  }

  const live = {};
  function setLive(name, ok) {
    live[name] = ok;
    const all = Object.values(live).every(Boolean);
    setConn(all ? "live" : "retrying", all ? "live" : "reconnecting…");
  }

  async function listObjects() {
    let min = 0;
    for (const k of KINDS) {
      const l = await getJSON("/v1/" + k);
      const m = new Map();
      for (const o of l.items || []) m.set(o.metadata.name, o);
      state.objs[k] = m;
      if (min === 0 || l.resourceVersion < min) min = l.resourceVersion;
    }
    refreshWarnings();
    return min;
  }

  async function listEvents() {
    const l = await getJSON("/v1/events");
    state.events = new Map();
    for (const o of l.items || []) state.events.set(o.metadata.name, o);
    return l.resourceVersion;
  }

  let warnTimer = null;
  function refreshWarnings() {
    if (warnTimer) return;
    warnTimer = setTimeout(async () => {
      warnTimer = null;
      try { state.warnings = await getJSON("/ui/warnings"); schedule(); } catch (e) { /* shown next time */ }
    }, 300);
  }

  async function refreshStatus() {
    try { state.status = await getJSON("/v1/status"); } catch (e) { state.status = null; }
    schedule();
  }

  // ---- drawing ----

  let pending = false;
  function schedule() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; render(); });
  }

  function byName(a, b) { return a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0; }

  function ago(t) {
    const ms = Date.now() - new Date(t).getTime();
    if (!isFinite(ms)) return "";
    const s = Math.max(0, Math.round(ms / 1000));
    if (s < 60) return s + "s ago";
    if (s < 3600) return Math.floor(s / 60) + "m ago";
    if (s < 86400) return Math.floor(s / 3600) + "h ago";
    return Math.floor(s / 86400) + "d ago";
  }

  function bytes(n) {
    if (!n) return "";
    const gib = n / (1 << 30);
    return gib >= 1 ? gib.toFixed(1) + " GiB" : Math.round(n / (1 << 20)) + " MiB";
  }

  function podClass(p) {
    const st = p.status || {};
    switch (st.phase) {
      case "Running": return st.ready ? "ok" : "warn";
      case "Failed": case "Lost": return "bad";
      case "Succeeded": return "";
      default: return "info";
    }
  }

  function podItem(p) {
    const st = p.status || {};
    const cls = podClass(p);
    const label = (st.phase || "Pending") + (st.phase === "Running" ? (st.ready ? "" : " · not ready") : "");
    const restarts = st.restarts ? " ↻" + st.restarts : "";
    return el("li", { "data-pod": p.metadata.name, "data-phase": st.phase || "Pending", "data-ready": st.ready ? "true" : "false", title: st.message || "" },
      el("span", { class: "dot " + cls }),
      el("span", { class: "pod-name" }, p.metadata.name),
      el("span", { class: "chip " + cls }, label + restarts));
  }

  function boardCard(n, pods) {
    const st = n.status || {};
    const phase = st.phase || "Unknown";
    const cls = phase === "Ready" ? "ok" : phase === "NotReady" ? "bad" : "";
    const facts = [st.model, st.archVariant || st.arch, st.cpus ? st.cpus + " CPU" : "", bytes(st.memoryBytes),
      st.kernel ? "kernel " + st.kernel : "", st.systemd ? "systemd " + st.systemd : "", st.version ? "herd " + st.version : ""]
      .filter(Boolean).join(" · ");
    const chips = el("div", { class: "chips" },
      el("span", { class: "chip" }, st.server ? "server" : "worker"),
      st.address ? el("span", { class: "chip mono" }, st.address) : null,
      n.spec && n.spec.unschedulable ? el("span", { class: "chip warn" }, "cordoned") : null,
      st.fenced ? el("span", { class: "chip" }, "fenced") : null,
      st.cgroup ? el("span", { class: "chip" }, "cgroup " + st.cgroup) : null);
    for (const d of st.devices || []) chips.append(el("span", { class: "chip mono", "data-device": d }, d));
    for (const c of ["memory", "cpu"]) {
      if (!st.cgroup) break;
      if ((st.cgroupControllers || []).includes(c)) chips.append(el("span", { class: "chip ok" }, c + " limits")); // else a warning says
    }
    for (const c of st.conditions || []) {
      const good = c.status === "True";
      chips.append(el("span", { class: "chip " + (good ? "ok" : c.status === "False" ? "bad" : ""), title: c.message || c.reason || "", "data-condition": c.type },
        c.type + (good ? "" : "=" + c.status)));
    }
    const warns = el("ul", { class: "warnings" });
    for (const w of state.warnings[n.metadata.name] || []) warns.append(el("li", { title: w.message, "data-warning": w.short }, "⚠ " + w.message));
    const list = el("ul", { class: "pods" });
    if (pods.length === 0) list.append(el("li", { class: "none" }, "no pods"));
    for (const p of pods) list.append(podItem(p));
    const since = st.since ? el("span", { class: "since", "data-time": st.since, title: phase + " since " + st.since }, ago(st.since)) : null;
    return el("article", { class: "board", "data-node": n.metadata.name, "data-phase": phase },
      el("div", { class: "board-head" },
        el("span", { class: "board-name" }, n.metadata.name),
        since,
        el("span", { class: "badge " + cls, "data-role": "phase" }, phase)),
      facts ? el("div", { class: "facts" }, facts) : null,
      chips, warns.childElementCount ? warns : null, list);
  }

  function renderBoards() {
    const pods = [...state.objs.pods.values()].sort(byName);
    const byNode = new Map();
    for (const p of pods) {
      const node = (p.spec && p.spec.node) || "";
      const ph = p.status && p.status.phase;
      if (ph === "Succeeded" && node) continue; // finished; the timeline tells
      if (!byNode.has(node)) byNode.set(node, []);
      byNode.get(node).push(p);
    }
    const box = document.getElementById("boards");
    const cards = [];
    for (const n of [...state.objs.nodes.values()].sort(byName)) cards.push(boardCard(n, byNode.get(n.metadata.name) || []));
    const unplaced = byNode.get("") || [];
    for (const [node, ps] of byNode) {
      if (node !== "" && !state.objs.nodes.has(node)) unplaced.push(...ps); // on a board that is gone
    }
    if (unplaced.length) {
      const list = el("ul", { class: "pods" });
      for (const p of unplaced) list.append(podItem(p));
      cards.push(el("article", { class: "board", "data-node": "" },
        el("div", { class: "board-head" }, el("span", { class: "board-name" }, "not placed"),
          el("span", { class: "badge info" }, String(unplaced.length))), list));
    }
    if (cards.length === 0) cards.push(el("div", { class: "empty" }, "no boards have joined yet"));
    box.replaceChildren(...cards);
  }

  function renderServices() {
    const svcs = [...state.objs.services.values()].sort(byName);
    const box = document.getElementById("services");
    if (svcs.length === 0) { box.replaceChildren(el("div", { class: "empty" }, "no services")); return; }
    const tb = el("tbody");
    for (const s of svcs) {
      const ports = ((s.spec && s.spec.ports) || []).map((p) => (p.name || p.target) + (p.name && p.name !== p.target ? "→" + p.target : "")).join(", ");
      const eps = el("td", { class: "mono" });
      const list = (s.status && s.status.endpoints) || [];
      if (list.length === 0) eps.append(el("span", { class: "chip warn" }, "no ready endpoints"));
      for (const e of list) {
        eps.append(el("span", { class: "endpoint", "data-endpoint": e.address, title: "pod " + e.pod + " on " + e.node },
          e.address, el("span", { class: "node" }, "  " + e.pod + " @ " + e.node)));
      }
      tb.append(el("tr", { "data-service": s.metadata.name }, el("td", {}, s.metadata.name), el("td", { class: "mono" }, ports), eps));
    }
    box.replaceChildren(el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "SERVICE"), el("th", {}, "PORTS"), el("th", {}, "ENDPOINTS"))), tb));
  }

  function renderTimeline() {
    const evs = [...state.events.values()].sort((a, b) => {
      const ta = new Date(a.spec.time).getTime(), tb = new Date(b.spec.time).getTime();
      return tb - ta || (a.metadata.name < b.metadata.name ? 1 : -1);
    }).slice(0, MAX_TIMELINE);
    const box = document.getElementById("timeline");
    if (evs.length === 0) { box.replaceChildren(el("li", { class: "empty" }, "no events yet")); return; }
    box.replaceChildren(...evs.map((e) => {
      const s = e.spec || {};
      const obj = s.object || {};
      const ref = String(obj.kind || "").replace(/s$/, "") + "/" + (obj.name || "");
      return el("li", { "data-event": e.metadata.name, "data-type": s.type, "data-reason": s.reason, "data-object": ref, "data-node": s.node || "" },
        el("span", { class: "when", "data-time": s.time, title: s.time }, ago(s.time)),
        el("span", { class: "what", title: ref }, ref),
        el("span", {}, el("span", { class: "reason" + (s.type === "Warning" ? " warn-text" : "") }, s.reason),
          el("span", { class: "msg" }, s.message || ""), s.node ? el("span", { class: "node" }, "on " + s.node) : null));
    }));
  }

  function renderSummary() {
    const nodes = [...state.objs.nodes.values()];
    const ready = nodes.filter((n) => n.status && n.status.phase === "Ready").length;
    const pods = [...state.objs.pods.values()];
    const running = pods.filter((p) => p.status && p.status.phase === "Running").length;
    const box = document.getElementById("summary");
    const parts = [
      el("span", { "data-summary": "boards" }, el("b", {}, ready + "/" + nodes.length), " boards ready"),
      el("span", { "data-summary": "pods" }, el("b", {}, String(running)), " pods running"),
    ];
    if (state.status && state.status.leader) parts.push(el("span", { "data-summary": "leader" }, "leader ", el("b", {}, state.status.leader)));
    box.replaceChildren(...parts);
    document.title = (ready < nodes.length ? "⚠ " : "") + "herd: " + ready + "/" + nodes.length + " boards ready";
  }

  function render() {
    renderSummary();
    renderBoards();
    renderServices();
    renderTimeline();
  }

  // Relative times move on by themselves.
  setInterval(() => {
    for (const t of document.querySelectorAll("[data-time]")) t.textContent = ago(t.dataset.time);
  }, 5000);

  follow("objects", listObjects, (rv) => "/v1/watch?resourceVersion=" + rv, (ev) => {
    const k = ev.object && ev.object.kind;
    if (!state.objs[k]) return ev.type !== "RELIST";
    if (k === "nodes") refreshWarnings();
    return apply(state.objs[k], ev);
  });
  follow("events", listEvents, (rv) => "/v1/events?watch=1&resourceVersion=" + rv, (ev) => {
    const ok = apply(state.events, ev);
    if (state.events.size > 1000) { // the store keeps the newest 1000
      const names = [...state.events.keys()].sort();
      for (const n of names.slice(0, names.length - 1000)) state.events.delete(n);
    }
    return ok;
  });
  refreshStatus();
  setInterval(refreshStatus, 15000);
})();
