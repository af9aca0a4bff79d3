/** `config` with `hidden` as non-enumerable properties: a logged, serialised or spread config never shows them. */
export function withHidden<T extends object, H extends object>(config: T, hidden: H): T & H {
  for (const [key, value] of Object.entries(hidden))
    Object.defineProperty(config, key, { value, enumerable: false });
  return config as T & H;
}
