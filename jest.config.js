/**
 * unit: no services. workflow: the workflows on a Temporal dev server each
 * file starts (the project's CLI, a free port) with real workers and fake
 * activities; no PostgreSQL, no sim cluster. integration: the Temporal dev
 * server started by the project's own script (test/integration/global-setup.ts)
 * and the local PostgreSQL ($TEST_DATABASE_URL, default database harness_s_test).
 */
const common = {
  testEnvironment: 'node',
  transform: { '^.+\\.ts$': ['@swc/jest'] },
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
};
