/**
 * unit: no services. workflow: the workflows on a Temporal dev server each
 * file starts (the project's CLI, a free port) with real workers and fake
 * activities; no PostgreSQL, no sim cluster. integration: the Temporal dev
 * server started by the project's own script (test/integration/global-setup.ts)
 * and the local PostgreSQL ($TEST_DATABASE_URL, default database harness_s_test).
 */

// The report charts' packages (vega, vega-lite and their d3 modules) are ES
// modules only. The CLI import()s them natively; Jest on Node 20 cannot load an
// ES module from CommonJS, so it compiles these to CommonJS like the tests.
const ESM_ONLY_PACKAGES = [
  'vega',
  'vega-[a-z-]+',
  'd3-[a-z-]+',
  'internmap',
  'delaunator',
  'robust-predicates',
  'json-stringify-pretty-compact',
];

const common = {
  testEnvironment: 'node',
  transform: { '^.+\\.(ts|js|mjs)$': ['@swc/jest'] },
  transformIgnorePatterns: [`/node_modules/(?!(${ESM_ONLY_PACKAGES.join('|')})/)`],
  // vega-canvas's Node build awaits at its top level (to find the optional `canvas`
  // package), which CommonJS cannot do; its browser build does the same without
  // `canvas` (none here): no canvas, text measured by estimate.
  moduleNameMapper: { '^vega-canvas$': '<rootDir>/node_modules/vega-canvas/build/vega-canvas.browser.js' },
};

module.exports = {
  projects: [
    { ...common, displayName: 'unit', testMatch: ['<rootDir>/test/unit/**/*.test.ts'] },
    { ...common, displayName: 'workflow', testMatch: ['<rootDir>/test/workflow/**/*.test.ts'] },
    {
      ...common,
      displayName: 'integration',
      testMatch: ['<rootDir>/test/integration/**/*.test.ts'],
      globalSetup: '<rootDir>/test/integration/global-setup.ts',
      globalTeardown: '<rootDir>/test/integration/global-teardown.ts',
      slowTestThreshold: 60,
    },
  ],
  testTimeout: 180000,
  // Longest files first, and balanced shards of the integration tests (test/suite.sh).
  testSequencer: '<rootDir>/test/sequencer.js',
};
