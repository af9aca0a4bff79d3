import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { buildWidgetBundle } from '../src/bundle';

/** Writes dist/paygate-checkout.js (script tag) and dist/paygate-checkout.mjs (ES module). */
async function main() {
  const dist = path.resolve(__dirname, '..', process.env.SDK_OUT_DIR ?? 'dist');
  await mkdir(dist, { recursive: true });
  await writeFile(path.join(dist, 'paygate-checkout.js'), await buildWidgetBundle('iife'));
  await writeFile(path.join(dist, 'paygate-checkout.mjs'), await buildWidgetBundle('esm'));
  console.log(`checkout widget written to ${dist}`);
}

void main();
