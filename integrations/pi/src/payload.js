// The engine's system prompt addition (checkpoint-manager's gauge, for one) placed into the
// provider request pi is about to send. pi's `context` event carries no system prompt, so the
// addition assembled for a call is added here, in `before_provider_request`, at the end of the
// system prompt (its cacheable start stays the same from call to call).

/**
 * Returns a copy of `payload` with `addition` at the end of its system prompt, or null when the
 * payload has no system prompt in a shape this knows (the caller says so once).
 *
 * Shapes (pi-ai 0.73 providers): chat completions and responses APIs (`messages` / `input`
 * starting with a `system` or `developer` message), Anthropic (`system`: text blocks), Google
 * (`config.systemInstruction`: a string).
 * @param {any} payload
 * @param {string} addition
 * @returns {any | null}
 */
export function withSystemAddition(payload, addition) {
  if (!payload || typeof payload !== "object" || !addition) return null;
  for (const field of ["messages", "input"]) {
    const list = payload[field];
    const first = Array.isArray(list) ? list[0] : undefined;
    if (first && (first.role === "system" || first.role === "developer")) {
      let content;
      if (typeof first.content === "string") content = `${first.content}\n\n${addition}`;
      else if (Array.isArray(first.content)) content = [...first.content, { type: first.content[0]?.type ?? "text", text: addition }];
      else continue;
      return { ...payload, [field]: [{ ...first, content }, ...list.slice(1)] };
    }
  }
  if (Array.isArray(payload.system)) {
    return { ...payload, system: [...payload.system, { type: "text", text: addition }] };
  }
  if (typeof payload.system === "string") {
    return { ...payload, system: `${payload.system}\n\n${addition}` };
  }
  if (payload.config && typeof payload.config.systemInstruction === "string") {
    return { ...payload, config: { ...payload.config, systemInstruction: `${payload.config.systemInstruction}\n\n${addition}` } };
  }
  return null;
}
