import { securitySchemes } from '@paygate/http';
import { PaymentRefusedBody, PaymentRequirementsBody } from '../x402/server/payment-required';
import { VerifyRequest } from './verify';

export const paymentHeaderDoc =
  'Base64 of JSON { txHash, amount, token, network, from, to, signature }; signature = EIP-191 personal_sign by `from` of "Paygate payment\\ntx: <txHash lowercase>\\nresource: <resource from the 402>".';

export function gatewayOpenApi(baseUrl: string) {
  return {
    title: 'Paygate gateway',
    description:
      'Paid skill URLs (x402 payment-required flow, PROXY and TICKET modes), payment verification for the seller middleware, and the ticket JWKS.',
    serverUrl: baseUrl,
    securitySchemes: { apiKey: securitySchemes.apiKey },
    schemas: {
      PaymentRequirements: PaymentRequirementsBody,
      PaymentRefused: PaymentRefusedBody,
      VerifyRequest,
    },
  };
}
