import type { TObject, TSchema } from '@sinclair/typebox';
import type { Express } from 'express';
import { ErrorBody, RefundIdParam, RefundRequestIdParam, TransactionIdParam } from './http/schemas';
import {
  AccountList,
  ConflictIdParam,
  ConflictList,
  ConflictListQuery,
  ConflictResolved,
  ReconciliationReport,
  Suspense,
  UnmatchedRefundList,
  UnmatchedRefundListQuery,
} from './operator/schemas';
import { refundRequestMessage } from './refunds/routes';
import {
  ApproveBody,
  Refund,
  RefundBody,
  RefundCreated,
  RefundRequest,
  RefundRequestApproved,
  RefundRequestBody,
  RefundRequestList,
  RefundRequestListQuery,
  RejectBody,
} from './refunds/schemas';
import {
  Balances,
  Transaction,
  TransactionDetail,
  TransactionList,
  TransactionListQuery,
} from './views/schemas';

export const OPENAPI_PATH = '/api/v1/openapi/ledger.json';

/** TypeBox schemas are JSON Schema 2020-12 (OpenAPI 3.1's dialect); JSON drops TypeBox's symbol keys. */
const plain = (schema: TSchema): Record<string, unknown> => JSON.parse(JSON.stringify(schema));
const json = (schema: TSchema, description: string) => ({
  description,
  content: { 'application/json': { schema: plain(schema) } },
});
const body = (schema: TSchema, required = true, examples?: Record<string, unknown>) => ({
  required,
  content: {
    'application/json': {
      schema: plain(schema),
      ...(examples
        ? { examples: Object.fromEntries(Object.entries(examples).map(([k, value]) => [k, { value }])) }
        : {}),
    },
  },
});
const errors = (entries: Record<string, string>) =>
  Object.fromEntries(Object.entries(entries).map(([status, text]) => [status, json(ErrorBody, text)]));
/** Query or path parameters from the TypeBox object that validates them. */
const parameters = (where: 'query' | 'path', schema: TObject) =>
  Object.entries(schema.properties).map(([name, property]) => ({
    name,
    in: where,
    required: where === 'path' || (schema.required ?? []).includes(name),
    ...(property.description ? { description: property.description } : {}),
    schema: plain(property),
  }));

const idempotencyKey = {
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  description:
    'Per seller: the same key with the same request answers the stored response (nothing is booked twice); the same key with another request is 409 idempotency_key_reused.',
  schema: { type: 'string', pattern: '^[A-Za-z0-9._:-]{1,255}$' },
};

const seller = [{ apiKey: [] }];
const operator = [{ operatorToken: [] }];
const sellerErrors = { '401': 'missing_key | invalid_api_key | unknown_api_key: no valid sk_… key' };
const operatorErrors = { '401': 'unauthorized: operator token required' };

const FEE_RULE =
  'Fee rule: a refund is split like the payment: the seller bears 95% and the platform returns its 5% fee in proportion. ' +
  'The split is cumulative (seller part = floor(total refunded x 95%) - what the seller already bore), so partial refunds add up exactly to the original shares. ' +
  'While the payment is held (phase in_escrow) both parts come out of the holds: the refund is instant and nothing is owed. ' +
  'After release (available, settling or settled; phase after_release) the seller part is debited from the seller balance, which may go negative (owed, recovered from later settlements), and the platform part from platform revenue. ' +
  'The USDC is sent back to the payer wallet by settlement (refund.initiated -> refund.completed with refundTxHash); the refund is pending until then.';

const SIGNED_MESSAGE = refundRequestMessage('<transactionId>', '<reason>');

/** The OpenAPI 3.1 description of the escrow-ledger HTTP API, built from the schemas the routes validate with. */
export function ledgerOpenApi() {
  return {
    openapi: '3.1.0',
    info: {
      title: 'Paygate escrow ledger',
      version: '1.0.0',
      description:
        'The double-entry ledger of the escrow wallet: transactions (payments held for their hold period, then released and settled at 95% to the seller, 5% platform fee), balances, seller refunds, buyer refund requests, and the operator views (payment conflicts, suspense, accounts, reconciliation with the chain). Amounts are decimal USDC strings with at most 6 decimals.',
    },
    components: {
      securitySchemes: {
        apiKey: {
          type: 'http',
          scheme: 'bearer',
          description: 'the seller API key: Authorization: Bearer sk_…',
        },
        operatorToken: {
          type: 'http',
          scheme: 'bearer',
          description: 'Authorization: Bearer <OPERATOR_TOKEN>',
        },
      },
      schemas: {
        Transaction: plain(Transaction),
        Refund: plain(Refund),
        RefundRequest: plain(RefundRequest),
        Balances: plain(Balances),
        ReconciliationReport: plain(ReconciliationReport),
        Error: plain(ErrorBody),
      },
    },
    paths: {
      '/api/v1/refunds': {
        post: {
          operationId: 'createRefund',
          summary: 'Refund (part of) a transaction of the calling seller',
          description: `Any transaction of the seller may be refunded, in one or several parts, up to its amount. Instant while the funds are in escrow, otherwise the seller balance is debited. ${FEE_RULE}`,
          security: seller,
          parameters: [idempotencyKey],
          requestBody: body(RefundBody, true, {
            partial: {
              transactionId: 'txn_01KAQ3T0000X7Q0E4W9T6B2M8C',
              amount: '4',
              reason: 'customer asked',
            },
          }),
          responses: {
            '201': json(
              RefundCreated,
              'the booked refund (status pending until the transfer back is on chain)',
            ),
            ...errors({
              '400': 'invalid_request: a field breaks a rule (error.field, error.rule); amount must be > 0',
              ...sellerErrors,
              '404': 'not_found: no such transaction for this seller',
              '409':
                'amount_exceeds_refundable (error.refundable says what remains) | transaction_reversed | idempotency_key_reused',
            }),
          },
        },
      },
      '/api/v1/refunds/{id}': {
        get: {
          operationId: 'getRefund',
          summary: 'One refund of the calling seller',
          security: seller,
          parameters: parameters('path', RefundIdParam),
          responses: {
            '200': json(Refund, 'the refund; completed with refundTxHash once sent on chain'),
            ...errors({ ...sellerErrors, '404': 'not_found' }),
          },
        },
      },
      '/api/v1/refund-requests': {
        post: {
          operationId: 'createRefundRequest',
          summary: 'Buyer: ask the merchant for a refund (signed by the payer wallet, no API key)',
          description: `The payer proves it is the payer with an EIP-191 personal_sign signature over exactly this message (lines separated by \\n, no trailing newline):\n\n\`\`\`\n${SIGNED_MESSAGE}\n\`\`\`\n\nThe request is pending until the merchant approves (a refund is booked) or rejects it; one pending request per transaction. Raises refund.requested.`,
          security: [],
          requestBody: body(RefundRequestBody, true, {
            request: {
              transactionId: 'txn_01KAQ3T0000X7Q0E4W9T6B2M8C',
              reason: 'never arrived',
              signature: `0x${'ab'.repeat(65)}`,
            },
          }),
          responses: {
            '201': json(RefundRequest, 'the pending request'),
            ...errors({
              '400': 'invalid_request: a field breaks a rule, or the signature is not an EIP-191 signature',
              '403': 'not_payer: signed by another wallet than the payer (field signature)',
              '404': 'not_found: no such transaction',
              '409': 'nothing_refundable | refund_request_pending',
            }),
          },
        },
        get: {
          operationId: 'listRefundRequests',
          summary: "The calling seller's refund requests, newest first",
          security: seller,
          parameters: parameters('query', RefundRequestListQuery),
          responses: {
            '200': json(RefundRequestList, 'at most 100 requests'),
            ...errors({ '400': 'invalid_request (bad status)', ...sellerErrors }),
          },
        },
      },
      '/api/v1/refund-requests/{id}': {
        get: {
          operationId: 'getRefundRequest',
          summary: 'One refund request of the calling seller',
          security: seller,
          parameters: parameters('path', RefundRequestIdParam),
          responses: {
            '200': json(RefundRequest, 'the request'),
            ...errors({ ...sellerErrors, '404': 'not_found' }),
          },
        },
      },
      '/api/v1/refund-requests/{id}/approve': {
        post: {
          operationId: 'approveRefundRequest',
          summary:
            'Merchant: approve a pending request; books the refund (all that remains unless amount says less)',
          description: FEE_RULE,
          security: seller,
          parameters: [...parameters('path', RefundRequestIdParam), idempotencyKey],
          requestBody: body(ApproveBody, false, { all: {}, part: { amount: '2' } }),
          responses: {
            '200': json(RefundRequestApproved, 'the request, now approved, with the booked refund'),
            ...errors({
              '400': 'invalid_request',
              ...sellerErrors,
              '404': 'not_found: no such request for this seller',
              '409':
                'refund_request_not_pending | amount_exceeds_refundable | transaction_reversed | idempotency_key_reused',
            }),
          },
        },
      },
      '/api/v1/refund-requests/{id}/reject': {
        post: {
          operationId: 'rejectRefundRequest',
          summary: 'Merchant: reject a pending request',
          security: seller,
          parameters: [...parameters('path', RefundRequestIdParam), idempotencyKey],
          requestBody: body(RejectBody, false, { reason: { reason: 'delivered' } }),
          responses: {
            '200': json(RefundRequest, 'the request, now rejected'),
            ...errors({
              '400': 'invalid_request',
              ...sellerErrors,
              '404': 'not_found',
              '409': 'refund_request_not_pending | idempotency_key_reused',
            }),
          },
        },
      },
      '/api/v1/transactions': {
        get: {
          operationId: 'listTransactions',
          summary: "The calling seller's transactions, newest first, by cursor",
          security: seller,
          parameters: parameters('query', TransactionListQuery),
          responses: {
            '200': json(TransactionList, 'a page of transactions'),
            ...errors({ '400': 'invalid_request: bad status, limit or cursor', ...sellerErrors }),
          },
        },
      },
      '/api/v1/transactions/{id}': {
        get: {
          operationId: 'getTransaction',
          summary: 'One transaction with its history and refunds',
          security: seller,
          parameters: parameters('path', TransactionIdParam),
          responses: {
            '200': json(TransactionDetail, 'the transaction'),
            ...errors({ ...sellerErrors, '404': 'not_found' }),
          },
        },
      },
      '/api/v1/balances': {
        get: {
          operationId: 'getBalances',
          summary: "The calling seller's balances: held, available, settling, settled, owed",
          security: seller,
          responses: { '200': json(Balances, 'the balances'), ...errors(sellerErrors) },
        },
      },
      '/api/v1/operator/ledger/conflicts': {
        get: {
          operationId: 'listConflicts',
          summary: 'Operator: payments the ledger refused to credit (nothing was credited for them)',
          security: operator,
          parameters: parameters('query', ConflictListQuery),
          responses: {
            '200': json(ConflictList, 'the conflicts'),
            ...errors({ '400': 'invalid_request (bad status)', ...operatorErrors }),
          },
        },
      },
      '/api/v1/operator/ledger/conflicts/{id}/resolve': {
        post: {
          operationId: 'resolveConflict',
          summary: 'Operator: mark a conflict resolved (books nothing)',
          security: operator,
          parameters: parameters('path', ConflictIdParam),
          responses: {
            '200': json(ConflictResolved, 'resolved'),
            ...errors({ '400': 'invalid_request (bad id)', ...operatorErrors, '404': 'not_found' }),
          },
        },
      },
      '/api/v1/operator/ledger/suspense': {
        get: {
          operationId: 'getSuspense',
          summary: 'Operator: money that reached the escrow wallet and that no payment has claimed',
          security: operator,
          responses: {
            '200': json(Suspense, 'suspense balance and unclaimed transfers'),
            ...errors(operatorErrors),
          },
        },
      },
      '/api/v1/operator/ledger/unmatched-refunds': {
        get: {
          operationId: 'listUnmatchedRefunds',
          summary:
            'Operator: refunds of transfers that no payment claimed (checkout transfer.refund_requested), booked out of suspense and sent back to the payer by settlement',
          security: operator,
          parameters: parameters('query', UnmatchedRefundListQuery),
          responses: {
            '200': json(UnmatchedRefundList, 'the refunds, newest first'),
            ...errors({ ...operatorErrors, '400': 'invalid_request (status)' }),
          },
        },
      },
      '/api/v1/operator/ledger/accounts': {
        get: {
          operationId: 'listAccounts',
          summary: 'Operator: every ledger account and its balance',
          security: operator,
          responses: { '200': json(AccountList, 'the accounts'), ...errors(operatorErrors) },
        },
      },
      '/api/v1/reconciliation': {
        get: {
          operationId: 'reconcile',
          summary:
            "Operator: compare the ledger with the escrow wallet's on-chain USDC balance and with itself",
          description:
            'Lists every difference: escrow_asset vs the chain, the trial balance, and each account vs the sum of its postings. A difference also sets the gauge ledger_reconciliation_differences and logs an error.',
          security: operator,
          responses: {
            '200': json(ReconciliationReport, 'the report (balanced: false lists the differences)'),
            ...errors({ ...operatorErrors, '503': 'chain_unavailable: the chain could not be read' }),
          },
        },
      },
      [OPENAPI_PATH]: {
        get: {
          operationId: 'ledgerOpenApi',
          summary: 'This document',
          security: [],
          responses: { '200': { description: 'OpenAPI 3.1 document' } },
        },
      },
    },
  };
}

/** Mounts GET /api/v1/openapi/ledger.json (the document is built once). */
export function mountOpenApiRoute(app: Express): void {
  const document = JSON.stringify(ledgerOpenApi());
  app.get(OPENAPI_PATH, (_req, res) => {
    res.setHeader('Access-Control-Allow-Origin', '*');
    res.type('application/json').send(document);
  });
}
