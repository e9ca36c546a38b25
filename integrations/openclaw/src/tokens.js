// Client-side token arithmetic: a chars/4 estimate (ctxhost's default `tokenCounter`) used only
// where the server's own estimate is not available per message, and the last-resort trim that
// keeps what `assemble` returns within OpenClaw's `tokenBudget`.

/** @typedef {Record<string, any>} AgentMessage */

const IMAGE_TOKENS = 1200;

/**
 * Roughly how many tokens a message costs the model: its text, thinking, tool-call names and
 * arguments, divided by four.
 * @param {AgentMessage} message
 * @returns {number}
 */
export function estimateTokens(message) {
  if (message === null || typeof message !== "object") return 0;
  let chars = 0;
  let images = 0;
  /** @param {unknown} content */
  const addContent = (content) => {
    if (typeof content === "string") {
      chars += content.length;
      return;
    }
    if (!Array.isArray(content)) return;
    for (const block of content) {
      if (!block || typeof block !== "object") continue;
      switch (block.type) {
        case "text":
          chars += String(block.text ?? "").length;
          break;
        case "thinking":
          chars += String(block.thinking ?? "").length;
          break;
        case "toolCall":
          chars += String(block.name ?? "").length + JSON.stringify(block.arguments ?? {}).length;
          break;
        case "image":
          images += 1;
          break;
        default:
          chars += JSON.stringify(block).length;
      }
    }
  };
  if (typeof message.summary === "string") chars += message.summary.length;
  if ("content" in message) addContent(message.content);
  else if (typeof message.summary !== "string") chars += JSON.stringify(message).length;
  return Math.ceil(chars / 4) + images * IMAGE_TOKENS;
}

/**
 * The ids of the tool calls an assistant message makes.
 * @param {AgentMessage} message
 * @returns {Set<string>}
 */
function toolCallIds(message) {
  const ids = new Set();
  if (message?.role === "assistant" && Array.isArray(message.content)) {
    for (const block of message.content) {
      if (block?.type === "toolCall" && typeof block.id === "string") ids.add(block.id);
    }
  }
  return ids;
}

/**
 * Splits messages into units that must be kept or dropped together: an assistant message that
 * calls tools, with the tool results that answer it; every other message alone.
 * @param {readonly AgentMessage[]} messages
 * @returns {{ start: number, end: number }[]} half-open ranges, in order
 */
export function units(messages) {
  const out = [];
  let i = 0;
  while (i < messages.length) {
    const ids = toolCallIds(messages[i]);
    let end = i + 1;
    if (ids.size > 0) {
      while (
        end < messages.length &&
        messages[end]?.role === "toolResult" &&
        ids.has(messages[end].toolCallId)
      ) {
        end += 1;
      }
    }
    out.push({ start: i, end });
    i = end;
  }
  return out;
}

/**
 * Drops the oldest messages until `total` fits `budget`, never a message `keep` protects (what
 * ctxhost inserted: a compaction summary, a checkpoint restore) and never the newest unit. A tool
 * call and its results go together.
 * @param {readonly AgentMessage[]} messages
 * @param {number} budget
 * @param {number} total the estimate of all messages (the server's, when it has one)
 * @param {(message: AgentMessage) => boolean} keep
 * @returns {{ messages: AgentMessage[], dropped: number, droppedTokens: number, total: number }}
 */
export function fitToBudget(messages, budget, total, keep) {
  if (!(budget > 0) || total <= budget) {
    return { messages: [...messages], dropped: 0, droppedTokens: 0, total };
  }
  const parts = units(messages);
  const drop = new Set();
  let droppedTokens = 0;
  for (let u = 0; u < parts.length - 1 && total - droppedTokens > budget; u++) {
    const { start, end } = parts[u];
    const slice = messages.slice(start, end);
    if (slice.some(keep)) continue;
    droppedTokens += slice.reduce((sum, m) => sum + estimateTokens(m), 0);
    drop.add(u);
  }
  const kept = [];
  let dropped = 0;
  parts.forEach(({ start, end }, u) => {
    if (drop.has(u)) dropped += end - start;
    else kept.push(...messages.slice(start, end));
  });
  return { messages: kept, dropped, droppedTokens, total: Math.max(0, total - droppedTokens) };
}
