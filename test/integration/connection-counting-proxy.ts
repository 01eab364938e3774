/**
 * A TCP proxy in front of a server that records each connection it opens to
 * the server: when it opened, when the server ended it, and the most open at
 * once. For an OpenEnv server, one connection is one session (a WebSocket at
 * /ws), so this is how many sessions the server held, seen from its side.
 */
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';

export interface ProxiedConnection {
  /** Date.now() when the connection to the server was made. */
  openedAt: number;
  /** Date.now() when the server ended it (or it broke); null while open. */
  closedAt: number | null;
}

export interface ConnectionCountingProxy {
  url: string;
  connections: ProxiedConnection[];
  /** Connections to the server open now. */
  open(): number;
  /** The most connections to the server open at once since the proxy started. */
  peak(): number;
  close(): Promise<void>;
}

export async function startConnectionCountingProxy(target: { host: string; port: number }): Promise<ConnectionCountingProxy> {
  const connections: ProxiedConnection[] = [];
  const sockets = new Set<Socket>();
  let open = 0;
  let peak = 0;
  // Half-open allowed: a client's FIN goes on to the server, and the client sees its connection closed only once the server has closed it.
  const server = createServer({ allowHalfOpen: true }, (client) => {
    sockets.add(client);
    client.pause();
    const upstream = connect(target.port, target.host);
    sockets.add(upstream);
    const record: ProxiedConnection = { openedAt: 0, closedAt: null };
    let counted = false;
    // The server's end of the connection (its FIN) is when it has dropped the session: counted before the client can see it.
    const ended = () => {
      if (!counted || record.closedAt !== null) return;
      record.closedAt = Date.now();
      open -= 1;
    };
    upstream.once('connect', () => {
      record.openedAt = Date.now();
      connections.push(record);
      counted = true;
      open += 1;
      peak = Math.max(peak, open);
      upstream.pipe(client);
      client.pipe(upstream);
      client.resume();
    });
    upstream.once('end', ended);
    upstream.once('close', () => {
      ended();
      sockets.delete(upstream);
      client.destroy();
    });
    client.once('close', () => {
      sockets.delete(client);
      upstream.end();
    });
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    connections,
    open: () => open,
    peak: () => peak,
    close: () =>
      new Promise((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
