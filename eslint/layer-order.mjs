// An ESLint rule that keeps the house one-way: a file may import its own layer
// and the layers below it (eslint/layers.mjs), never a layer above. Relative
// imports only: packages are the other rules' business.
import path from 'node:path';
import { minimatch } from 'minimatch';
import { LAYERS } from './layers.mjs';

const ROOT = path.resolve(import.meta.dirname, '..');

/** The index of the first layer whose pattern matches a file of the repository, or -1. */
export function layerOf(file) {
  const relative = path.relative(ROOT, file).split(path.sep).join('/');
  return LAYERS.findIndex((layer) => layer.files.some((pattern) => minimatch(relative, pattern)));
}

function resolveImport(fromFile, source) {
  const target = path.resolve(path.dirname(fromFile), source);
  return /\.[cm]?[jt]s$/.test(target) ? target : `${target}.ts`;
}

export const layerOrder = {
  meta: {
    type: 'problem',
    docs: { description: 'imports run down the layers of eslint/layers.mjs, never up' },
    messages: {
      upward: "'{{source}}' is in layer {{to}}, above this file's layer {{from}}: imports run down the layers (eslint/layers.mjs)",
      unplaced: 'this file is in no layer of eslint/layers.mjs: add its folder there, in its place in the order',
    },
    schema: [],
  },
  create(context) {
    const from = layerOf(context.filename);
    if (from < 0) return { Program: (node) => context.report({ node, messageId: 'unplaced' }) };
    function check(node) {
      const source = node.source?.value;
      if (typeof source !== 'string' || !source.startsWith('.')) return;
      let to = layerOf(resolveImport(context.filename, source));
      // `../x` may name a folder's index.ts.
      if (to < 0) to = layerOf(path.join(path.resolve(path.dirname(context.filename), source), 'index.ts'));
      if (to > from)
        context.report({ node: node.source, messageId: 'upward', data: { source, from: LAYERS[from].name, to: LAYERS[to].name } });
    }
    return { ImportDeclaration: check, ExportNamedDeclaration: check, ExportAllDeclaration: check, ImportExpression: check };
  },
};

export default { rules: { 'layer-order': layerOrder } };
