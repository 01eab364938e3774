/**
 * What the SIMULATED cluster's APIs (inference, trainer) and its HTTP server
 * share: a request as an API sees it, its reply, and the API's interface.
 */
import type { IncomingHttpHeaders } from 'node:http';

export interface SimHttpRequest {
  method: string;
  /** The URL path without the query string. */
  path: string;
  headers: IncomingHttpHeaders;
  /** The parsed JSON body; undefined when there was none or it is not JSON (see `contentType`). */
  body: unknown;
  /** The body as sent, for binary (protobuf) bodies. */
  raw: Buffer;
  /** The media type of the body, lower case, without parameters. */
  contentType: string;
}

export interface SimHttpReply {
  status: number;
  /** A JSON body, `text` for a plain-text one, or `bytes` of `contentType`. */
  json?: unknown;
  text?: string;
  bytes?: Uint8Array;
  contentType?: string;
  headers?: Record<string, string>;
}

/** One API mounted on the server; it renders errors in its own protocol's style. */
export interface SimApi {
  handle(request: SimHttpRequest): Promise<SimHttpReply>;
  badRequest(message: string): SimHttpReply;
}
