// Writes types.d.ts from docs/openapi.json's components.schemas, so the
// client's types are the API's own. `node scripts/gen-types.mjs --check`
// exits 1 when the committed file differs (test/types.test.js runs it).
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const here = (p) => fileURLToPath(new URL(p, import.meta.url));
const OUT = here('../types.d.ts');

function tsType(s) {
  if (s.$ref) return s.$ref.split('/').pop();
  if (s.const !== undefined) return JSON.stringify(s.const);
  if (s.enum) return s.enum.map((v) => JSON.stringify(v)).join(' | ');
  if (s.oneOf && !s.type) return s.oneOf.map(tsType).join(' | ');
  const types = Array.isArray(s.type) ? s.type : s.type ? [s.type] : [];
  if (types.length === 0) return 'unknown';
  return types.map((t) => {
    switch (t) {
      case 'string': return 'string';
      case 'integer': case 'number': return 'number';
      case 'boolean': return 'boolean';
      case 'null': return 'null';
      case 'array': return `Array<${tsType(s.items || {})}>`;
      case 'object': return s.properties ? objType(s, '') : 'Record<string, unknown>';
      default: throw new Error(`unsupported schema type ${t}`);
    }
  }).join(' | ');
}

function doc(text, indent) {
  if (!text) return '';
  const lines = text.replace(/\*\//g, '*\\/').split('\n');
  return `${indent}/** ${lines.join(`\n${indent} * `)} */\n`;
}

function objType(s, indent) {
  const req = new Set(s.required || []);
  let out = '{\n';
  for (const [name, p] of Object.entries(s.properties)) {
    out += doc(p.description, indent + '  ');
    out += `${indent}  ${name}${req.has(name) ? '' : '?'}: ${tsType(p)};\n`;
  }
  return out + indent + '}';
}

export function generate() {
  const spec = JSON.parse(readFileSync(here('../../../docs/openapi.json'), 'utf8'));
  let out = '// Generated from docs/openapi.json by scripts/gen-types.mjs: do not edit.\n';
  for (const [name, s] of Object.entries(spec.components.schemas)) {
    out += '\n' + doc(s.description, '');
    if (s.type === 'object' && s.properties) out += `export interface ${name} ${objType(s, '')}\n`;
    else out += `export type ${name} = ${tsType(s)};\n`;
  }
  return out;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const text = generate();
  if (process.argv.includes('--check')) {
    if (readFileSync(OUT, 'utf8') !== text) {
      console.error('types.d.ts is stale: run node scripts/gen-types.mjs');
      process.exit(1);
    }
  } else {
    writeFileSync(OUT, text);
  }
}
