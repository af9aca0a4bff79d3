import path from 'node:path';
import { build } from 'esbuild';

export type WidgetFormat = 'iife' | 'esm';

const ENTRY = path.join(__dirname, 'index.ts');

/** The widget (with qrcode) as one script: `iife` defines the global PaygateCheckout, `esm` is an ES module. */
export async function buildWidgetBundle(
  format: WidgetFormat,
  options: { minify?: boolean } = {},
): Promise<string> {
  const result = await build({
    entryPoints: [ENTRY],
    bundle: true,
    write: false,
    format,
    platform: 'browser',
    target: ['es2020'],
    minify: options.minify ?? true,
    legalComments: 'none',
    ...(format === 'iife' ? { globalName: 'PaygateCheckout' } : {}),
    logLevel: 'silent',
  });
  const output = result.outputFiles[0];
  if (!output) throw new Error('esbuild produced no output for the checkout widget');
  return output.text;
}
