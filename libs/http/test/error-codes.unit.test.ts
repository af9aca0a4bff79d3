import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { HttpReason } from '../src';

describe('the error codes libs/http answers', () => {
  it('are each documented once in docs/api.md "Errors (every service)"', () => {
    const api = readFileSync(join(__dirname, '../../../docs/api.md'), 'utf8');
    const section = api.split('## Errors (every service)')[1]?.split('\n## ')[0] ?? '';
    const documented = [...section.matchAll(/^\| \d(?:\d\d|xx) \| `([a-z_]+)` \|/gm)].map(
      (match) => match[1],
    );
    expect(documented.sort()).toEqual(Object.values(HttpReason).sort());
  });
});
