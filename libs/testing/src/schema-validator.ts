import Ajv, { type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';

const ajv = addFormats(new Ajv({ strict: false, allErrors: false, validateFormats: true }));
const compiled = new Map<string, ValidateFunction>();

/** An ajv validator of a plain JSON Schema (OpenAPI 3.1 keywords ajv does not know are ignored). */
export function schemaValidator(schema: Record<string, any>): ValidateFunction {
  const key = JSON.stringify(schema);
  let validator = compiled.get(key);
  if (!validator) {
    const { $schema: _ignored, ...rest } = schema;
    validator = ajv.compile(rest);
    compiled.set(key, validator);
  }
  return validator;
}
