// The desk's one script: it keeps the page live. On each server-sent
// event (the supervisor's notices) it fetches the page's content again and
// swaps it in: 100 ms after a transition, a message or an escalation, a
// second after a tool call (an agent at work makes many), and never while
// the operator is typing in it. Without it every page still reads and acts; it is only
// not live.
(function () {
  'use strict';
  var body = document.body, live = document.getElementById('live');
  var status = document.getElementById('live-status');
  var src = body.getAttribute('data-events');
  if (!src || !live || !window.EventSource || !window.fetch) return;
  var timer = null, due = 0, waiting = false, swaps = 0;

  // typing: a field of the page has focus or holds unsent text.
  function typing() {
    var a = document.activeElement;
    if (a && live.contains(a) && /^(INPUT|TEXTAREA|SELECT)$/.test(a.tagName) && a.type !== 'submit') return true;
    var fields = live.querySelectorAll('textarea, input[type=text]');
    for (var i = 0; i < fields.length; i++) if (fields[i].value !== fields[i].defaultValue) return true;
    return false;
  }
  function refresh() {
    timer = null;
    due = 0;
    if (typing()) { waiting = true; return; }
    waiting = false;
    fetch(location.pathname + location.search, { headers: { 'X-Fragment': '1' }, credentials: 'same-origin' })
      .then(function (r) { if (!r.ok) throw new Error('HTTP ' + r.status); return r.text(); })
      .then(function (html) {
        if (typing()) { waiting = true; return; }
        live.innerHTML = html;
        body.setAttribute('data-swaps', String(++swaps));
        setStatus('live', true);
      })
      .catch(function () { setStatus('stale: reload the page', false); });
  }
  // soon refreshes within ms: a sooner need moves a later refresh up.
  function soon(ms) {
    var at = Date.now() + ms;
    if (timer && due <= at) return;
    if (timer) clearTimeout(timer);
    due = at;
    timer = setTimeout(refresh, ms);
  }
  function setStatus(text, on) { if (status) { status.textContent = text; status.className = on ? 'on' : ''; } }

  var es = new EventSource(src);
  es.addEventListener('open', function () { setStatus('live', true); });
  es.addEventListener('error', function () { setStatus(es.readyState === 2 ? 'not live: the swarm stopped' : 'reconnecting…', false); });
  es.addEventListener('notice', function (e) {
    var kind = '';
    try {
      var ev = JSON.parse(e.data);
      kind = ev.kind;
      body.setAttribute('data-last-event', ev.id);
    } catch (err) { /* a bad event still refreshes */ }
    soon(kind === 'activity' ? 1000 : 100);
  });
  es.addEventListener('reload', function () { soon(100); });
  // A refresh held back while the operator typed runs once they leave it.
  live.addEventListener('focusout', function () { if (waiting) soon(300); });
})();
