/**
 * The SIMULATED policy called in-process instead of over HTTP: for tools that
 * study a sim world (the effect matrix) without a running sim cluster.
 */
import type { Policy, PolicyReply, PolicyRequest } from '../../policy/client';
import { SimPolicyModel, seededRandom, type PolicyParams } from './policy-model';
import type { SimWorld } from './world';

export class LocalSimPolicy implements Policy {
  private readonly model: SimPolicyModel;
  private readonly params: PolicyParams;

  constructor(world: SimWorld, params?: PolicyParams) {
    this.model = new SimPolicyModel(world);
    this.params = params ?? this.model.initialParams();
  }

  async complete(request: PolicyRequest): Promise<PolicyReply> {
    // The sim offers no tools, so a tool message never reaches it; were one to, it reads as the user's.
    const promptTokenIds = this.model.tokenizer.renderPrompt(
      request.messages.map(({ role, content }) => ({ role: role === 'tool' ? 'user' : role, content })),
    );
    const generated = this.model.generate(this.params, promptTokenIds, {
      temperature: request.temperature,
      maxTokens: request.maxTokens ?? 3,
      random: seededRandom(request.seed, promptTokenIds.length),
    });
    const tokenIds = generated.map((t) => t.id);
    const content = this.model.tokenizer.decode(tokenIds.filter((id) => id !== this.model.tokenizer.id('<|end|>')));
    return { content, promptTokenIds, tokenIds, logprobs: generated.map((t) => t.logprob) };
  }
}
