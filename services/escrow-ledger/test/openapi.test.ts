import { newRefundRequestSigning } from '@paygate/agent-client';
import { assertValid, ErrorBodySchema, plainSchema } from '@paygate/http';
import { refundRequestMessage } from '@paygate/protocol';
import {
  documentedOperationNames,
  documentedOperations,
  expectApiContract,
  openSchema,
  waitFor,
} from '@paygate/testing';
import type { TSchema } from '@sinclair/typebox';
import { Wallet } from 'ethers';
import { type Kysely, sql } from 'kysely';
import { AccountList, ConflictList, Suspense, UnmatchedRefundList } from '../src/operator/schemas';
import {
  Refund,
  RefundBody,
  RefundCreated,
  RefundRequest,
  RefundRequestApproved,
  RefundRequestBody,
  RefundRequestList,
} from '../src/refunds/schemas';
import { Balances, TransactionDetail, TransactionList } from '../src/views/schemas';
import {
  type LedgerHarness,
  OPERATOR_TOKEN,
  observedData,
  paymentData,
  SELLER_KEY,
  startLedgerHarness,
} from './helpers';

// anvil account #2, the payer of paymentData()
const BUYER_KEY = '0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a';

let h: LedgerHarness;
let db: Kysely<any>;
let doc: any;

beforeAll(async () => {
  h = await startLedgerHarness('ledgerapi');
  db = openSchema(h.env.schemaFor('escrow-ledger'));
  const res = await fetch(`${h.ledger.url}/api/v1/openapi/ledger.json`, {
    signal: AbortSignal.timeout(5_000),
  });
  expect(res.status).toBe(200);
  doc = await res.json();
});
afterAll(async () => {
  await db?.destroy();
  await h?.stop();
});

describe('escrow-ledger routes and their OpenAPI document', () => {
  it('lists exactly the routes express serves; each answers a documented status; broken rules are 400s naming field and rule', async () => {
    expect(doc.openapi).toMatch(/^3\.1\.\d+$/);
    await expectApiContract({
      url: h.ledger.url,
      app: h.ledger.app,
      document: doc,
      credentials: { apiKey: SELLER_KEY, operatorToken: OPERATOR_TOKEN },
    });
    expect(documentedOperationNames(doc).length).toBeGreaterThanOrEqual(18);
    for (const { method, path, operation } of documentedOperations(doc)) {
      const names = (operation.parameters ?? []).filter((p: any) => p.in === 'path').map((p: any) => p.name);
      expect({ method, path, names: names.sort() }).toEqual({
        method,
        path,
        names: [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort(),
      });
      // Every documented error answers the one error body.
      for (const [status, response] of Object.entries(operation.responses as Record<string, any>)) {
        if (Number(status) >= 400) {
          expect(response.content['application/json'].schema).toEqual(plainSchema(ErrorBodySchema));
        }
      }
    }
    // The buyer's status route takes a seller key or none.
    expect(doc.paths['/api/v1/refund-requests/{id}'].get.security).toEqual([{}, { apiKey: [] }]);
    expect(doc.paths['/api/v1/refund-requests'].post.security).toBeUndefined();
  });

  it('documents the validating schemas, the states, the fee rule and the signed message', () => {
    const refund = doc.paths['/api/v1/refunds'].post;
    expect(refund.requestBody.content['application/json'].schema).toEqual(plainSchema(RefundBody));
    expect(refund.security).toEqual([{ apiKey: [] }]);
    expect(refund.parameters.map((p: any) => p.name)).toContain('Idempotency-Key');
    expect(refund.description).toMatch(/95%/);
    expect(refund.description).toMatch(/in_escrow/);
    expect(refund.description).toMatch(/after_release/);
    const refundSchema = refund.responses['201'].content['application/json'].schema;
    expect(JSON.stringify(refundSchema)).toContain('"enum":["pending","completed","failed"]');

    const request = doc.paths['/api/v1/refund-requests'].post;
    expect(request.requestBody.content['application/json'].schema).toEqual(plainSchema(RefundRequestBody));
    const placeholders = { chainId: '<chainId>', nonce: '<nonce>', expiresAt: '<expiresAt>' };
    expect(request.description).toContain(
      refundRequestMessage({ transactionId: '<transactionId>' }, '<reason>', placeholders),
    );
    expect(request.description).toContain(
      'Paygate refund request\ntransaction: <transactionId>\nchain id: <chainId>\nnonce: <nonce>\nexpires at: <expiresAt>\nreason: <reason>',
    );
    expect(doc.components.schemas.RefundRequest.properties.status.enum).toEqual([
      'pending',
      'approved',
      'rejected',
      'completed',
    ]);
    expect(doc.components.schemas.Transaction.properties.status.enum).toEqual(
      expect.arrayContaining(['held', 'available', 'settling', 'settled', 'refunded', 'reversed']),
    );
    expect(doc.paths['/api/v1/reconciliation'].get.security).toEqual([{ operatorToken: [] }]);
    expect(doc.paths['/api/v1/transactions'].get.parameters.map((p: any) => p.name)).toEqual([
      'status',
      'limit',
      'cursor',
      'confirmedFrom',
      'confirmedBefore',
      'skill',
      'txHash',
    ]);
  });

  it('the documented schemas validate and describe what the routes really answer', async () => {
    const conform = (schema: TSchema, value: unknown) => assertValid(schema, value, 'response');
    const payment = paymentData(h.sellerId, { amount: '10' });
    await h.publish('transfer.observed', observedData(payment));
    await h.publish('payment.confirmed', payment);
    const transactionId = await waitFor(
      async () =>
        (
          await sql<{
            id: string;
          }>`select id from transactions where tx_hash = ${payment.txHash.toLowerCase()}`.execute(db)
        ).rows[0]?.id,
      { timeoutMs: 10_000, message: 'transaction booked' },
    );

    const list = await h.http('/api/v1/transactions?limit=5');
    expect(list.status).toBe(200);
    conform(TransactionList, list.body);
    conform(Balances, (await h.http('/api/v1/balances')).body);

    // Bodies and queries are checked by the same schemas: the error names the field and the rule.
    const badLimit = await h.http('/api/v1/transactions?limit=500');
    expect(badLimit.status).toBe(400);
    expect(badLimit.body.error).toMatchObject({ field: 'limit', rule: 'must be an integer from 1 to 200' });
    conform(ErrorBodySchema, badLimit.body);
    const extra = await h.http('/api/v1/refunds', {
      body: { transactionId, amount: '1', reason: 'x', tip: 1 },
    });
    expect(extra.status).toBe(400);
    expect(extra.body.error).toMatchObject({ field: 'tip', rule: 'is not an allowed field' });

    const created = await h.http('/api/v1/refunds', {
      body: { transactionId, amount: '4', reason: 'asked' },
    });
    expect(created.status).toBe(201);
    conform(RefundCreated, created.body);
    expect(created.body).toMatchObject({ amount: '4', sellerAmount: '3.8', platformFeeReturned: '0.2' });
    conform(Refund, (await h.http(`/api/v1/refunds/${created.body.refundId}`)).body);

    const reason = 'never arrived';
    const signing = newRefundRequestSigning(31337, h.clock.now());
    const signature = await new Wallet(BUYER_KEY).signMessage(
      refundRequestMessage({ transactionId }, reason, signing),
    );
    const badSignature = await h.http('/api/v1/refund-requests', {
      key: null,
      body: { transactionId, reason, ...signing, signature: '0x1234' },
    });
    expect(badSignature.body.error).toMatchObject({
      field: 'signature',
      rule: 'must be a 0x-prefixed 65-byte hex signature',
    });
    const requested = await h.http('/api/v1/refund-requests', {
      key: null,
      body: { transactionId, reason, ...signing, signature },
    });
    expect(requested.status).toBe(201);
    conform(RefundRequest, requested.body);
    conform(RefundRequestList, (await h.http('/api/v1/refund-requests?status=pending')).body);
    const approved = await h.http(`/api/v1/refund-requests/${requested.body.refundRequestId}/approve`, {
      body: { amount: '1' },
    });
    expect(approved.status).toBe(200);
    conform(RefundRequestApproved, approved.body);
    const detail = await h.http(`/api/v1/transactions/${transactionId}`);
    conform(TransactionDetail, detail.body);
    expect(detail.body.refunds).toHaveLength(2);

    const op = { key: OPERATOR_TOKEN };
    conform(ConflictList, (await h.http('/api/v1/operator/ledger/conflicts?status=all', op)).body);
    conform(Suspense, (await h.http('/api/v1/operator/ledger/suspense', op)).body);
    conform(AccountList, (await h.http('/api/v1/operator/ledger/accounts', op)).body);
    conform(UnmatchedRefundList, (await h.http('/api/v1/operator/ledger/unmatched-refunds', op)).body);
    const badRefundStatus = await h.http('/api/v1/operator/ledger/unmatched-refunds?status=sent', op);
    expect(badRefundStatus.body.error).toMatchObject({ field: 'status' });
    const badConflict = await h.http('/api/v1/operator/ledger/conflicts/abc/resolve', { ...op, body: {} });
    expect(badConflict.body.error).toMatchObject({ field: 'id', rule: 'must be a conflict id' });
    // No chain is configured in this suite: the documented 503.
    const reconciliation = await h.http('/api/v1/reconciliation', op);
    expect(reconciliation.status).toBe(503);
    conform(ErrorBodySchema, reconciliation.body);
    expect(Object.keys(doc.paths['/api/v1/reconciliation'].get.responses)).toContain('503');
  });
});

describe('CORS on the buyer routes', () => {
  it('lets any page call the lookup and refund-request routes (preflight, answers and errors); seller routes get none', async () => {
    const from = { origin: 'https://shop.example' };
    const preflight = await fetch(`${h.ledger.url}/api/v1/refund-requests`, {
      method: 'OPTIONS',
      headers: {
        ...from,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type',
      },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe('*');
    expect(preflight.headers.get('access-control-allow-headers')).toMatch(/content-type/i);
    // A 404 (not booked yet) and a body parser's 400 are readable too: the widget reads their error code.
    const lookup = await fetch(`${h.ledger.url}/api/v1/transactions/lookup?sessionId=cs_nothing`, {
      headers: from,
    });
    expect(lookup.status).toBe(404);
    expect(lookup.headers.get('access-control-allow-origin')).toBe('*');
    const broken = await fetch(`${h.ledger.url}/api/v1/refund-requests`, {
      method: 'POST',
      headers: { ...from, 'content-type': 'application/json' },
      body: '{',
    });
    expect(broken.status).toBe(400);
    expect(broken.headers.get('access-control-allow-origin')).toBe('*');
    const status = await fetch(`${h.ledger.url}/api/v1/refund-requests/rrq_nothing`, { headers: from });
    expect(status.headers.get('access-control-allow-origin')).toBe('*');
    for (const path of [
      '/api/v1/balances',
      '/api/v1/transactions',
      '/api/v1/refund-requests/rrq_x/approve',
    ]) {
      const seller = await fetch(`${h.ledger.url}${path}`, {
        method: 'OPTIONS',
        headers: { ...from, 'access-control-request-method': 'GET' },
      });
      expect(seller.headers.get('access-control-allow-origin')).toBeNull();
    }
  });
});
