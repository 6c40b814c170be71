//! [`TurnBuilder`]: the assembled turn an assembler puts together at the end of
//! a stream, part by part in the order the model produced them.

use ai_core::completion::{AssembledToolCall, CompletionFinal, FinishReason};
use ai_core::event::UsageFact;
use ai_core::message::AssistantBlock;

/// A turn in the making: each part goes both into the turn's blocks (in the
/// order it is added) and into the field that sums it up (the text, the
/// reasoning, the calls).
#[derive(Debug, Default)]
pub struct TurnBuilder {
    text: String,
    reasoning: Option<String>,
    refusal: Option<String>,
    tool_calls: Vec<AssembledToolCall>,
    blocks: Vec<AssistantBlock>,
}

impl TurnBuilder {
    /// An empty turn.
    pub fn new() -> Self {
        Self::default()
    }

    /// Answer text, as a plain text block.
    pub fn text(&mut self, text: String) {
        self.text_block(AssistantBlock::Text { text });
    }

    /// A block of answer text: a text block, or a provider's own block that
    /// holds answer text (which the turn's text then carries too).
    pub fn text_block(&mut self, block: AssistantBlock) {
        if let AssistantBlock::Text { text }
        | AssistantBlock::Provider {
            text: Some(text), ..
        } = &block
        {
            self.text.push_str(text);
        }
        self.blocks.push(block);
    }

    /// Reasoning text (the turn has reasoning from then on, even an empty one),
    /// as a reasoning block with its `signature` and `item_id`.
    pub fn reasoning(&mut self, text: String, signature: Option<String>, item_id: Option<String>) {
        self.reasoning
            .get_or_insert_with(String::new)
            .push_str(&text);
        self.blocks.push(AssistantBlock::Reasoning {
            text,
            signature,
            item_id,
        });
    }

    /// Refusal text (no block).
    pub fn refusal(&mut self, text: &str) {
        self.refusal.get_or_insert_with(String::new).push_str(text);
    }

    /// A block that adds nothing to the text, reasoning or calls.
    pub fn block(&mut self, block: AssistantBlock) {
        self.blocks.push(block);
    }

    /// A tool call, with the block that places it.
    pub fn tool_call(&mut self, call: AssembledToolCall) {
        self.blocks.push(AssistantBlock::ToolCall {
            id: call.id.clone(),
        });
        self.tool_calls.push(call);
    }

    /// The calls added so far.
    pub fn tool_calls(&self) -> &[AssembledToolCall] {
        &self.tool_calls
    }

    /// The turn, with how and why it stopped and its usage. Calls stay in the
    /// order they were added.
    pub fn finish(
        self,
        finish_reason: FinishReason,
        raw_finish_reason: Option<String>,
        usage: Option<UsageFact>,
    ) -> CompletionFinal {
        CompletionFinal {
            text: self.text,
            reasoning: self.reasoning,
            refusal: self.refusal,
            tool_calls: self.tool_calls,
            finish_reason,
            raw_finish_reason,
            response_id: None,
            usage,
            blocks: self.blocks,
        }
    }
}

#[cfg(test)]
mod tests {
    use ai_core::completion::ToolCallOutcome;

    use super::*;

    #[test]
    fn parts_go_to_the_blocks_and_to_their_fields() {
        let mut turn = TurnBuilder::new();
        turn.reasoning(String::new(), Some("sig".into()), None);
        turn.text("Hi".into());
        turn.refusal("no");
        turn.tool_call(AssembledToolCall {
            index: 0,
            id: "c".into(),
            name: "f".into(),
            arguments: "{}".into(),
            outcome: ToolCallOutcome::Complete,
            raw: None,
        });
        let turn = turn.finish(FinishReason::ToolCalls, None, None);
        assert_eq!(turn.text, "Hi");
        assert_eq!(turn.reasoning.as_deref(), Some(""));
        assert_eq!(turn.refusal.as_deref(), Some("no"));
        assert_eq!(turn.tool_calls.len(), 1);
        assert_eq!(
            turn.blocks,
            [
                AssistantBlock::Reasoning {
                    text: String::new(),
                    signature: Some("sig".into()),
                    item_id: None,
                },
                AssistantBlock::Text { text: "Hi".into() },
                AssistantBlock::ToolCall { id: "c".into() },
            ]
        );
    }
}
