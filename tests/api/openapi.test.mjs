// GET /api/v1/openapi.json from a real `certfleet serve`: a valid OpenAPI 3.1 document by an
// independent validator (@seriousme/openapi-schema-validator, the OpenAPI Initiative's JSON
// schemas), needing a token like every /api/ route. That every route is in it is checked by the
// C++ test api_openapi.* (it reads the router's table).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Validator } from '@seriousme/openapi-schema-validator';
import { startCertfleet } from '../testbed/certfleet_server.mjs';

test('the served OpenAPI document validates as OpenAPI 3.1', async () => {
  const cf = await startCertfleet();
  try {
    const anonymous = await cf.api('GET', '/api/v1/openapi.json', undefined, '');
    assert.equal(anonymous.status, 401);
    const viewer = await cf.token('viewer');
    const r = await cf.api('GET', '/api/v1/openapi.json', undefined, viewer);
    assert.equal(r.status, 200, r.text);
    assert.match(r.headers.get('content-type') ?? '', /^application\/json/);
    const validator = new Validator();
    const res = await validator.validate(r.body);
    assert.ok(res.valid, JSON.stringify(res.errors, null, 2));
    assert.equal(validator.version, '3.1');
    assert.match(r.body.info.description, /RFC 3339 UTC/);
    // The validator can fail: a parameter without `in` is refused.
    const broken = structuredClone(r.body);
    broken.paths['/healthz'].get.parameters = [{ name: 'x' }];
    assert.equal((await new Validator().validate(broken)).valid, false);
  } finally {
    await cf.stop();
  }
});
