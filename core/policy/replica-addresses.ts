/**
 * A run's inference replicas from its config: `policy.inferenceServers`, else
 * `policy.baseUrl`. A URL whose host name resolves to several addresses
 * stands for one replica per address (Docker Compose's `--scale vllm=3` gives
 * the service name one address per container), so scaling the replicas needs
 * no config change. Names are looked up again after a while, so a replica
 * added or removed is seen.
 */
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { replicaUrl } from './replicas';

export type HostLookup = (host: string) => Promise<string[]>;

const systemLookup: HostLookup = async (host) => (await lookup(host, { all: true })).map((a) => a.address);

/** How long a name's addresses are used before it is looked up again. */
const TTL_MS = 15_000;

export class ReplicaAddresses {
  private readonly cache = new Map<string, { urls: string[]; at: number }>();

  constructor(
    private readonly resolve: HostLookup = systemLookup,
    private readonly now: () => number = Date.now,
  ) {}

  /** The replicas the configured URLs stand for, each once, in the order given. */
  async expand(configured: readonly string[]): Promise<string[]> {
    const all = await Promise.all(configured.map((url) => this.expandOne(replicaUrl(url))));
    return [...new Set(all.flat())];
  }

  private async expandOne(url: string): Promise<string[]> {
    const parsed = new URL(url);
    const host = parsed.hostname.replace(/^\[|\]$/g, '');
    if (isIP(host) || host === 'localhost') return [url];
    const cached = this.cache.get(url);
    if (cached && this.now() - cached.at < TTL_MS) return cached.urls;
    let addresses: string[];
    try {
      addresses = [...new Set(await this.resolve(host))].sort();
    } catch {
      // Not resolvable now: the URL as given; a request to it says why.
      addresses = [];
    }
    const urls =
      addresses.length <= 1
        ? [url]
        : addresses.map((address) => {
            const each = new URL(url);
            each.hostname = isIP(address) === 6 ? `[${address}]` : address;
            return replicaUrl(each.toString());
          });
    this.cache.set(url, { urls, at: this.now() });
    return urls;
  }
}
