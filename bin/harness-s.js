#!/usr/bin/env node
// The `harness-s` command (`npx harness-s` in a checkout, or after `npm install -g`):
// the TypeScript CLI in cli/main.ts, loaded through tsx.
require('tsx/cjs');
require('../cli/main.ts');
