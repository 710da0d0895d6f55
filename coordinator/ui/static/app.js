// The dashboard's one script (docs/ui.md, "Live updates"): it keeps the job
// list and a job page up to date with the server-sent events of
// /ui/events. It builds every element with textContent, never HTML.
(function () {
  'use strict';
  var body = document.body;
  var live = body.getAttribute('data-live');
  var state = document.getElementById('live-state');
  if (!live || !window.EventSource) {
    return;
  }
  // The stream starts at the event position the page was rendered at
  // (data-after): what changed in between is replayed, not lost.
  var params = [];
  if (live === 'job') {
    params.push('job=' + encodeURIComponent(body.getAttribute('data-job')));
  }
  var after = body.getAttribute('data-after');
  if (after && /^[0-9]+$/.test(after)) {
    params.push('after=' + after);
  }
  var url = '/ui/events' + (params.length ? '?' + params.join('&') : '');

  function setState(text) {
    if (state) {
      state.textContent = text;
    }
  }

  function setStatus(td, status) {
    td.textContent = status;
    td.className = td.className.replace(/\bstatus-\S+/g, '').trim() + ' status-' + status.toLowerCase();
  }

  function cell(cls, text) {
    var td = document.createElement('td');
    td.className = cls;
    td.textContent = text;
    return td;
  }

  var columns = [
    ['project', 'project'], ['agent', 'agent'], ['phone', 'phone'], ['generation', 'generation'],
    ['attempts', 'attempts'], ['submitted', 'submitted_by'], ['created', 'created_at'], ['updated', 'updated_at']
  ];

  // matches reports whether a new job belongs on this filtered first page.
  function matches(table, j) {
    if (table.getAttribute('data-first') !== 'true') {
      return false;
    }
    var want = {status: j.status, project: j.project, agent: j.agent, phone: j.phone};
    for (var k in want) {
      var f = table.getAttribute('data-' + k);
      if (f && f !== want[k]) {
        return false;
      }
    }
    return true;
  }

  function findRow(tbody, id) {
    var rows = tbody.rows;
    for (var i = 0; i < rows.length; i++) {
      if (rows[i].getAttribute('data-job') === id) {
        return rows[i];
      }
    }
    return null;
  }

  function onJobs(j) {
    var table = document.getElementById('jobs');
    if (!table) {
      return;
    }
    var tbody = table.tBodies[0];
    var tr = findRow(tbody, j.id);
    if (!tr) {
      if (!matches(table, j)) {
        return;
      }
      tr = document.createElement('tr');
      tr.setAttribute('data-job', j.id);
      var idCell = document.createElement('td');
      idCell.className = 'id';
      var a = document.createElement('a');
      a.href = '/ui/jobs/' + encodeURIComponent(j.id);
      a.textContent = j.id;
      idCell.appendChild(a);
      tr.appendChild(idCell);
      tr.appendChild(cell('status', ''));
      for (var c = 0; c < columns.length; c++) {
        tr.appendChild(cell(columns[c][0], ''));
      }
      tbody.insertBefore(tr, tbody.firstChild);
      var empty = document.querySelector('p.empty');
      if (empty) {
        empty.hidden = true;
      }
    }
    setStatus(tr.querySelector('td.status'), j.status);
    for (var i = 0; i < columns.length; i++) {
      var td = tr.querySelector('td.' + columns[i][0]);
      if (td) {
        td.textContent = String(j[columns[i][1]]);
      }
    }
  }

  function onJob(j) {
    var st = document.getElementById('job-status');
    if (!st || j.id !== body.getAttribute('data-job')) {
      return;
    }
    var changed = st.textContent !== j.status;
    setStatus(st, j.status);
    var fields = {'job-generation': j.generation, 'job-phone': j.phone, 'job-updated': j.updated_at};
    for (var id in fields) {
      var el = document.getElementById(id);
      if (el && String(fields[id]) !== el.textContent) {
        el.textContent = String(fields[id]);
        changed = true;
      }
    }
    var note = document.getElementById('live-note');
    if (note && changed) {
      note.hidden = false;
    }
  }

  var es = new EventSource(url);
  es.onopen = function () { setState('live'); };
  es.onerror = function () { setState('reconnecting…'); };
  es.addEventListener('job', function (ev) {
    var j;
    try {
      j = JSON.parse(ev.data);
    } catch (e) {
      return;
    }
    if (live === 'jobs') {
      onJobs(j);
    } else {
      onJob(j);
    }
  });
})();
