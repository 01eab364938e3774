/** Where the integration tests find their services. */
export const TEST_TEMPORAL_ADDRESS = process.env.TEST_TEMPORAL_ADDRESS || '127.0.0.1:17233';
export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL || 'postgresql://postgres@127.0.0.1:5432/harness_s_test';
