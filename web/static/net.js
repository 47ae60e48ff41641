// Requests to the API: the access token of servers started with --token,
// problem+json errors turned into messages, and a log of the latest
// requests (URL, bytes, time) that the browser tests and the console read.
import { parseBinary } from './format.js';

const $ = (id) => document.getElementById(id);

// The page itself loads without a token; data requests send it as a
// bearer header. It is asked for on the first 401 (again when refused) and
// kept in session storage, so it lasts as long as the tab and never
// appears in a URL.
const TOKEN_KEY = 'zvfserve-token';
let tokenAsked = null;

function askToken(refused) {
  if (!tokenAsked) {
    tokenAsked = new Promise((resolve) => {
      const form = $('tokenform'), msg = $('tokenmsg');
      msg.textContent = refused ? 'The server did not accept that token; try again.' : 'This server needs an access token.';
      msg.className = refused ? 'error' : '';
      $('token').value = '';
      form.hidden = false;
      $('token').focus();
      form.onsubmit = (e) => {
        e.preventDefault();
        sessionStorage.setItem(TOKEN_KEY, $('token').value.trim());
        form.hidden = true;
        tokenAsked = null;
        resolve();
      };
    });
  }
  return tokenAsked;
}

// PROBLEM_BASE: the start of the server's problem type URIs; the rest
// names the kind (openapi.yaml lists them).
const PROBLEM_BASE = 'https://zvfserve.dev/problems/';

export class ProblemError extends Error {
  constructor(status, title, detail, retryAfter = null, type = '') {
    super(`${status} ${title}${detail && detail !== title ? `: ${detail}` : ''}`);
    this.status = status;
    this.detail = detail || title; // what the server says went wrong, for messages of its own
    this.retryAfter = retryAfter; // ms the server asked to wait (Retry-After), or null
    // The kind of problem (storage-denied, overloaded, …), or '' when the
    // answer is not one of the server's (a proxy's 502).
    this.kind = typeof type === 'string' && type.startsWith(PROBLEM_BASE) ? type.slice(PROBLEM_BASE.length) : '';
  }
}

// HOPELESS: kinds of problem that asking again cannot mend, by what to
// tell the user. storage-denied: the backend refuses the server's own
// credentials (a 502 like a backend that is down, but no Retry-After);
// only the operator can fix that, so the page stops asking.
const HOPELESS = new Map([
  ['storage-denied', 'not retried: the server\'s storage refused it access (its credentials or permissions); reload once they are fixed'],
]);

// hopeless: why asking again after error e cannot help, or ''.
export const hopeless = (e) => (e instanceof ProblemError && HOPELESS.get(e.kind)) || '';

// retryNote: what a message about error e ends with: when it is asked
// again (wait ms, or null), or why it is not.
export function retryNote(e, wait) {
  if (wait !== null) return ` · retrying in ${waitText(wait)}`;
  const h = hopeless(e);
  return h ? ` · ${h}` : '';
}

// Answers that say the same request may succeed later: too many requests,
// a backend or store that is down or changing, a timeout, and a page
// cursor from a version of the store that is gone (409: asked again from
// the first page, it is answered from the new one).
const LATER = new Set([409, 429, 502, 503, 504]);
const RETRY_MIN_MS = 1000;
const RETRY_MAX_MS = 60000;

// retryDelay: how long to wait before asking again after error e, the
// attempt-th failure in a row (1, 2, …): at least what the server's
// Retry-After says, and a wait that doubles from a second with each
// failure, at most a minute, so a store that stays away is asked less and
// less often. A network failure (the server restarting) is retried the
// same way; null for answers that would not change by asking again (404,
// 422, a bad request, a hopeless kind) and for requests the page cancelled.
export function retryDelay(e, attempt) {
  if (e.name === 'AbortError' || hopeless(e)) return null;
  if (e instanceof ProblemError && !LATER.has(e.status) && e.retryAfter === null) return null;
  if (!(e instanceof ProblemError) && !e.network) return null; // a bug of the page, not the network
  const backoff = RETRY_MIN_MS * 2 ** Math.min(Math.max(attempt - 1, 0), 16);
  return Math.min(RETRY_MAX_MS, Math.max(RETRY_MIN_MS, backoff, e.retryAfter || 0));
}

// retryAfterMs reads a Retry-After header: seconds, or an HTTP date.
function retryAfterMs(h) {
  if (!h) return null;
  if (/^\s*\d+\s*$/.test(h)) return Number(h) * 1000;
  const t = Date.parse(h);
  return Number.isFinite(t) ? Math.max(0, t - Date.now()) : null;
}

// waitText: a retry's wait for people ("2 s").
export const waitText = (ms) => `${Math.round(ms / 1000)} s`;

// LOG_MAX bounds the request log: a tab left open streams tiles for
// hours, and only the latest requests are of use to anyone reading it.
const LOG_MAX = 500;

export class Net {
  // onWaitToken(): a request waits for the access token; onStoreChanged
  // (layer): a request of the layer's was planned on a version of its
  // store that is no longer served (410 store-changed).
  constructor(onWaitToken, onStoreChanged = () => {}) {
    this.log = []; // the latest LOG_MAX: {url, kind, layer, level, box, bytes, ms, status}
    this.logMax = LOG_MAX;
    this.requests = 0; // made since the page loaded
    this.bytes = 0;
    this.onWaitToken = onWaitToken;
    this.onStoreChanged = onStoreChanged;
  }

  // fetch is fetch with the bearer token; a 401 asks for a token and
  // retries. Concurrent requests share one question.
  async fetch(url, opts = {}) {
    for (;;) {
      const sent = sessionStorage.getItem(TOKEN_KEY);
      const headers = { ...(opts.headers || {}) };
      if (sent !== null) headers.Authorization = `Bearer ${sent}`;
      const r = await fetch(url, { ...opts, headers });
      if (r.status !== 401) return r;
      if (sent !== null && sessionStorage.getItem(TOKEN_KEY) === sent) sessionStorage.removeItem(TOKEN_KEY);
      this.onWaitToken();
      await askToken(sent !== null);
    }
  }

  async request(url, meta, signal, accept) {
    const entry = { url, ...meta, bytes: 0, ms: 0, status: 0, t0: performance.now() };
    this.requests++;
    // Cut in place, a quarter at a time: readers hold this array.
    if (this.log.length >= LOG_MAX) this.log.splice(0, this.log.length - LOG_MAX + Math.ceil(LOG_MAX / 4));
    this.log.push(entry);
    try {
      const r = await this.fetch(url, { signal, headers: accept ? { Accept: accept } : {} });
      entry.status = r.status;
      if (!r.ok) {
        let title = r.statusText, detail = '', type = '';
        try { const p = await r.json(); title = p.title || title; detail = p.detail || ''; type = p.type; } catch { /* not a problem document */ }
        const e = new ProblemError(r.status, title, detail, retryAfterMs(r.headers.get('Retry-After')), type);
        if (e.kind === 'store-changed' && meta.layer) this.onStoreChanged(meta.layer);
        throw e;
      }
      const buf = await r.arrayBuffer();
      entry.bytes = buf.byteLength;
      this.bytes += buf.byteLength;
      return buf;
    } catch (e) {
      if (e.name === 'AbortError') entry.aborted = true;
      // fetch's own failures: no answer, or one cut short.
      else if (e.name === 'TypeError') e.network = true;
      throw e;
    } finally {
      entry.ms = performance.now() - entry.t0;
    }
  }

  // binary is the parsed answer, with bytes: its size (this request's
  // own, whatever else is in flight).
  async binary(url, meta = {}, signal) {
    const buf = await this.request(url, meta, signal, 'application/vnd.zvf.v1+octet-stream');
    const out = parseBinary(buf);
    out.bytes = buf.byteLength;
    return out;
  }

  // json: the parsed answer; reviver (JSON.parse's) e.g. format.js exactJSON.
  async json(url, meta = {}, signal, reviver) {
    return JSON.parse(new TextDecoder().decode(await this.request(url, meta, signal, 'application/json')), reviver);
  }
}
