// Lint: floating promises are errors everywhere; workflow code may not touch
// node built-ins or I/O modules (it runs in Temporal's deterministic sandbox).
import { builtinModules } from 'node:module';
import tseslint from 'typescript-eslint';
import house from './eslint/layer-order.mjs';

const nodeBuiltins = [...builtinModules, ...builtinModules.map((m) => `node:${m}`)];

export default tseslint.config(
  { ignores: ['node_modules/**', '.tools/**', '.data/**', 'dist/**', 'coverage/**', '**/*.js', '**/*.mjs'] },
  ...tseslint.configs.recommended,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-require-imports': 'error',
    },
  },
  // SQL of the run store lives in core/store only: nothing else opens a PostgreSQL connection.
  {
    files: ['{core,activities,workers,sim-cluster,viewer,infra,cli}/**/*.ts'],
    ignores: ['core/store/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        { paths: [{ name: 'pg', message: 'PostgreSQL is reached through core/store (a store method or read model)' }] },
      ],
    },
  },
  // The layer order (eslint/layers.mjs): imports run down, never up.
  {
    files: ['{core,activities,workflows,workers,sim-cluster,viewer,infra,cli,bin}/**/*.ts'],
    plugins: { house },
    rules: { 'house/layer-order': 'error' },
  },
  {
    files: ['workflows/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [...nodeBuiltins, 'pg', 'openai', 'pino', '@temporalio/client', '@temporalio/worker', '@temporalio/activity'],
          patterns: [
            {
              group: ['../core/store/*', '../activities/*', '../infra/*', '../workers/*', '../cli/*'],
              message: 'workflow code is deterministic: no I/O modules',
            },
          ],
        },
      ],
    },
  },
);
