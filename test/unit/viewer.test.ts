/** The trajectory viewer's pure parts: escaping by construction, its address from the environment, the search's cursor and filters. */
import { html, href, raw, sparkline, withQuery } from '../../viewer/layout';
import { decodeCursor, encodeCursor, rolloutFilter } from '../../viewer/trajectory-pages';
import { groupFilter } from '../../viewer/step-page';
import { viewerAddressFromEnv, viewerUrlFromEnv } from '../../core/viewer-address';

test('every value put in a page is escaped unless it is markup the viewer made', () => {
  const text = '<img src=x onerror=alert(1)> & "quotes"';
  expect(html`<p title="${text}">${text}</p>`.text).toBe(
    '<p title="&lt;img src=x onerror=alert(1)&gt; &amp; &quot;quotes&quot;">&lt;img src=x onerror=alert(1)&gt; &amp; &quot;quotes&quot;</p>',
  );
  expect(html`<ul>${['<a>', raw('<li>ok</li>')]}</ul>`.text).toBe('<ul>&lt;a&gt;<li>ok</li></ul>');
  expect(html`${null}${undefined}${false}${0}`.text).toBe('0');
});

test('addresses escape each segment, so a task id with a slash or a space stays one segment', () => {
  expect(href('/runs', 'r 1', 'tasks', 'a/b?c')).toBe('/runs/r%201/tasks/a%2Fb%3Fc');
  expect(withQuery('/x', { a: 'b c', empty: '', none: undefined, n: 2 })).toBe('/x?a=b+c&n=2');
});

test('the viewer listens on loopback port 8240 unless the environment says otherwise, and refuses a port that is not one', () => {
  expect(viewerAddressFromEnv({})).toEqual({ host: '127.0.0.1', port: 8240 });
  expect(viewerAddressFromEnv({ HARNESS_S_UI_PORT: '9000', HARNESS_S_UI_HOST: '0.0.0.0' })).toEqual({ host: '0.0.0.0', port: 9000 });
  expect(() => viewerAddressFromEnv({ HARNESS_S_UI_PORT: 'eighty' })).toThrow("HARNESS_S_UI_PORT='eighty' is not a port");
});

test('links to the viewer use HARNESS_S_UI_URL when set, else the local address; off means no link', () => {
  expect(viewerUrlFromEnv({})).toBe('http://127.0.0.1:8240');
  expect(viewerUrlFromEnv({ HARNESS_S_UI_PORT: '9000', HARNESS_S_UI_HOST: '0.0.0.0' })).toBe('http://127.0.0.1:9000');
  expect(viewerUrlFromEnv({ HARNESS_S_UI_URL: 'https://viewer.example/' })).toBe('https://viewer.example');
  expect(viewerUrlFromEnv({ HARNESS_S_UI_URL: 'off' })).toBeNull();
  expect(() => viewerUrlFromEnv({ HARNESS_S_UI_URL: 'viewer:8240' })).toThrow('is not an http(s) address');
});

test("the search's cursor round-trips a key, and anything else reads as the first page", () => {
  const key = { phase: 'train', step: 12, taskId: 'task/ä 1', harnessId: 'ec-schema', sample: 3 };
  expect(decodeCursor(encodeCursor(key))).toEqual(key);
  expect(decodeCursor(null)).toBeNull();
  expect(decodeCursor('not-a-cursor')).toBeNull();
  expect(decodeCursor(Buffer.from(JSON.stringify(['train', 'x', 't', 'h', 0])).toString('base64url'))).toBeNull();
});

test('filters come from the query; blank ones match all, and an unknown outcome is ignored', () => {
  expect(rolloutFilter(new URLSearchParams('task=agg&kind=&outcome=maybe&failure=turn_limit'))).toEqual({
    phase: undefined,
    role: undefined,
    kind: undefined,
    harness: undefined,
    failureType: 'turn_limit',
    task: 'agg',
    outcome: undefined,
  });
  expect(groupFilter(new URLSearchParams('state=dead&harness=%20ec-schema%20'))).toEqual({
    kind: '',
    harness: 'ec-schema',
    outcome: '',
    failure: '',
    state: 'dead',
    task: '',
  });
});

test('a sparkline draws one point per step on a 0-to-1 scale, and says when there is none', () => {
  const svg = sparkline([0, 0.5, 1], 102, 22).text;
  expect(svg).toContain('points="1.0,21.0 51.0,11.0 101.0,1.0"');
  expect(sparkline([]).text).toContain('no steps');
});
