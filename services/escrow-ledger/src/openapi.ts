import {
  errorResponses,
  idempotencyKeyParameter,
  jsonRequestBody,
  jsonResponse,
  openApiDocument,
  schemaParameters,
  securitySchemes,
  serveOpenApi,
} from '@paygate/http';
import type { Express } from 'express';
import { RefundIdParam, RefundRequestIdParam, TransactionIdParam } from './http/schemas';
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
  TransactionLookup,
  TransactionLookupQuery,
} from './refunds/schemas';
import {
  Balances,
  Transaction,
  TransactionDetail,
  TransactionList,
  TransactionListQuery,
} from './views/schemas';

export const OPENAPI_PATH = '/api/v1/openapi/ledger.json';

// The ledger's own rule for keys (src/idempotency.ts), narrower than the shared default.
const idempotencyKey = {
  ...idempotencyKeyParameter(
    'Per seller: the same key with the same request answers the stored response (nothing is booked twice); the same key with another request is 409 idempotency_key_reused.',
  ),
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

const SIGNED_MESSAGE = refundRequestMessage({ transactionId: '<transactionId>' }, '<reason>');
const SIGNED_MESSAGE_TX = refundRequestMessage({ txHash: '<txHash>', logIndex: 0 }, '<reason>').replace(
  '0\n',
  '<logIndex>\n',
);
const SIGNED_MESSAGE_SESSION = refundRequestMessage({ sessionId: '<sessionId>' }, '<reason>');

/** The OpenAPI 3.1 description of the escrow-ledger HTTP API, built from the schemas the routes validate with. */
export function ledgerOpenApi() {
  return openApiDocument({
    title: 'Paygate escrow ledger',
    description:
      'The double-entry ledger of the escrow wallet: transactions (payments held for their hold period, then released and settled at 95% to the seller, 5% platform fee), balances, seller refunds, buyer refund requests, and the operator views (payment conflicts, suspense, accounts, reconciliation with the chain). Amounts are decimal USDC strings with at most 6 decimals.',
    securitySchemes: { apiKey: securitySchemes.apiKey, operatorToken: securitySchemes.operatorToken },
    schemas: { Transaction, Refund, RefundRequest, Balances, ReconciliationReport },
    paths: {
      '/api/v1/refunds': {
        post: {
          operationId: 'createRefund',
          summary: 'Refund (part of) a transaction of the calling seller',
          description: `Any transaction of the seller may be refunded, in one or several parts, up to its amount. Instant while the funds are in escrow, otherwise the seller balance is debited. ${FEE_RULE}`,
          security: seller,
          parameters: [idempotencyKey],
          requestBody: jsonRequestBody(RefundBody, {
            required: true,
            examples: {
              partial: {
                transactionId: 'txn_01KAQ3T0000X7Q0E4W9T6B2M8C',
                amount: '4',
                reason: 'customer asked',
              },
            },
          }),
          responses: {
            '201': jsonResponse(
              RefundCreated,
              'the booked refund (status pending until the transfer back is on chain)',
            ),
            ...errorResponses({
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
          parameters: schemaParameters('path', RefundIdParam),
          responses: {
            '200': jsonResponse(Refund, 'the refund; completed with refundTxHash once sent on chain'),
            ...errorResponses({ ...sellerErrors, '404': 'not_found' }),
          },
        },
      },
      '/api/v1/refund-requests': {
        post: {
          operationId: 'createRefundRequest',
          summary: 'Buyer: ask the merchant for a refund (signed by the payer wallet, no API key)',
          description: `Name the payment by exactly one of transactionId, txHash (the on-chain transfer; logIndex too when one transaction made several payments into escrow) or sessionId (the checkout session it paid). The payer proves it is the payer with an EIP-191 personal_sign signature over exactly this message (lines separated by \\n, no trailing newline):\n\n\`\`\`\n${SIGNED_MESSAGE}\n\`\`\`\n\nor, naming the transfer (without the log index line when logIndex is not given; txHash lowercase):\n\n\`\`\`\n${SIGNED_MESSAGE_TX}\n\`\`\`\n\nor, naming the checkout session:\n\n\`\`\`\n${SIGNED_MESSAGE_SESSION}\n\`\`\`\n\n@paygate/agent-client builds and signs it (agent.requestRefund). The answer carries the request id, its status and the transactionId; GET /api/v1/refund-requests/{id} follows it without a key. The request is pending until the merchant approves (a refund is booked) or rejects it; one pending request per transaction. Raises refund.requested.`,
          security: [],
          requestBody: jsonRequestBody(RefundRequestBody, {
            required: true,
            examples: {
              request: {
                transactionId: 'txn_01KAQ3T0000X7Q0E4W9T6B2M8C',
                reason: 'never arrived',
                signature: `0x${'ab'.repeat(65)}`,
              },
            },
          }),
          responses: {
            '201': jsonResponse(RefundRequest, 'the pending request'),
            ...errorResponses({
              '400': 'invalid_request: a field breaks a rule, or the signature is not an EIP-191 signature',
              '403': 'not_payer: signed by another wallet than the payer (field signature)',
              '404':
                'transaction_not_found: no payment on the books for this transactionId, txHash or sessionId (yet)',
              '409': 'nothing_refundable | refund_request_pending',
            }),
          },
        },
        get: {
          operationId: 'listRefundRequests',
          summary: "The calling seller's refund requests, newest first",
          security: seller,
          parameters: schemaParameters('query', RefundRequestListQuery),
          responses: {
            '200': jsonResponse(RefundRequestList, 'at most 100 requests'),
            ...errorResponses({ '400': 'invalid_request (bad status)', ...sellerErrors }),
          },
        },
      },
      '/api/v1/refund-requests/{id}': {
        get: {
          operationId: 'getRefundRequest',
          summary: "A refund request's status: public for the buyer (no key), or the calling seller's own",
          description:
            "Without Authorization anyone holding the request id (rrq_…, unguessable) reads its status, its refund and the refund transfer (refund.refundTxHash once completed). With a seller key only that seller's requests are found.",
          security: [{}, ...seller],
          parameters: schemaParameters('path', RefundRequestIdParam),
          responses: {
            '200': jsonResponse(RefundRequest, 'the request'),
            ...errorResponses({ ...sellerErrors, '404': 'not_found' }),
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
          parameters: [...schemaParameters('path', RefundRequestIdParam), idempotencyKey],
          requestBody: jsonRequestBody(ApproveBody, {
            required: false,
            examples: { all: {}, part: { amount: '2' } },
          }),
          responses: {
            '200': jsonResponse(RefundRequestApproved, 'the request, now approved, with the booked refund'),
            ...errorResponses({
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
          parameters: [...schemaParameters('path', RefundRequestIdParam), idempotencyKey],
          requestBody: jsonRequestBody(RejectBody, {
            required: false,
            examples: { reason: { reason: 'delivered' } },
          }),
          responses: {
            '200': jsonResponse(RefundRequest, 'the request, now rejected'),
            ...errorResponses({
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
          parameters: schemaParameters('query', TransactionListQuery),
          responses: {
            '200': jsonResponse(TransactionList, 'a page of transactions'),
            ...errorResponses({ '400': 'invalid_request: bad status, limit or cursor', ...sellerErrors }),
          },
        },
      },
      '/api/v1/transactions/lookup': {
        get: {
          operationId: 'lookupTransaction',
          summary: 'Public: the ledger transaction a checkout session or an on-chain transfer became',
          description:
            'What a buyer or the checkout widget knows (sessionId, or txHash and logIndex) to the ledger transactionId and what is still refundable. A payment is booked a moment after it is confirmed: 404 transaction_not_found until then.',
          security: [],
          parameters: schemaParameters('query', TransactionLookupQuery),
          responses: {
            '200': jsonResponse(TransactionLookup, 'the transaction'),
            ...errorResponses({
              '400': 'invalid_request: neither or both of sessionId and txHash, or logIndex needed',
              '404': 'transaction_not_found',
            }),
          },
        },
      },
      '/api/v1/transactions/{id}': {
        get: {
          operationId: 'getTransaction',
          summary: 'One transaction with its history and refunds',
          security: seller,
          parameters: schemaParameters('path', TransactionIdParam),
          responses: {
            '200': jsonResponse(TransactionDetail, 'the transaction'),
            ...errorResponses({ ...sellerErrors, '404': 'not_found' }),
          },
        },
      },
      '/api/v1/balances': {
        get: {
          operationId: 'getBalances',
          summary: "The calling seller's balances: held, available, settling, settled, owed",
          security: seller,
          responses: { '200': jsonResponse(Balances, 'the balances'), ...errorResponses(sellerErrors) },
        },
      },
      '/api/v1/operator/ledger/conflicts': {
        get: {
          operationId: 'listConflicts',
          summary: 'Operator: payments the ledger refused to credit (nothing was credited for them)',
          security: operator,
          parameters: schemaParameters('query', ConflictListQuery),
          responses: {
            '200': jsonResponse(ConflictList, 'the conflicts'),
            ...errorResponses({ '400': 'invalid_request (bad status)', ...operatorErrors }),
          },
        },
      },
      '/api/v1/operator/ledger/conflicts/{id}/resolve': {
        post: {
          operationId: 'resolveConflict',
          summary: 'Operator: mark a conflict resolved (books nothing)',
          security: operator,
          parameters: schemaParameters('path', ConflictIdParam),
          responses: {
            '200': jsonResponse(ConflictResolved, 'resolved'),
            ...errorResponses({ '400': 'invalid_request (bad id)', ...operatorErrors, '404': 'not_found' }),
          },
        },
      },
      '/api/v1/operator/ledger/suspense': {
        get: {
          operationId: 'getSuspense',
          summary: 'Operator: money that reached the escrow wallet and that no payment has claimed',
          security: operator,
          responses: {
            '200': jsonResponse(Suspense, 'suspense balance and unclaimed transfers'),
            ...errorResponses(operatorErrors),
          },
        },
      },
      '/api/v1/operator/ledger/unmatched-refunds': {
        get: {
          operationId: 'listUnmatchedRefunds',
          summary:
            'Operator: refunds of transfers that no payment claimed (checkout transfer.refund_requested), booked out of suspense and sent back to the payer by settlement',
          security: operator,
          parameters: schemaParameters('query', UnmatchedRefundListQuery),
          responses: {
            '200': jsonResponse(UnmatchedRefundList, 'the refunds, newest first'),
            ...errorResponses({ ...operatorErrors, '400': 'invalid_request (status)' }),
          },
        },
      },
      '/api/v1/operator/ledger/accounts': {
        get: {
          operationId: 'listAccounts',
          summary: 'Operator: every ledger account and its balance',
          security: operator,
          responses: { '200': jsonResponse(AccountList, 'the accounts'), ...errorResponses(operatorErrors) },
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
            '200': jsonResponse(ReconciliationReport, 'the report (balanced: false lists the differences)'),
            ...errorResponses({ ...operatorErrors, '503': 'chain_unavailable: the chain could not be read' }),
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
  });
}

/** Mounts GET /api/v1/openapi/ledger.json (the document is built once). */
export function mountOpenApiRoute(app: Express): void {
  serveOpenApi(app, OPENAPI_PATH, ledgerOpenApi());
}
