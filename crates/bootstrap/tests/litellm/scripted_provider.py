"""A scripted streaming model behind LiteLLM's proxy, for the live test of the
Anthropic wire (`cargo test -p toolwright-cli --test it litellm`).

LiteLLM translates each `/v1/messages` request into its internal chat format,
calls this provider, and translates the chunks it yields back into Messages API
events. The provider appends every request it sees (the messages as LiteLLM
handed them over) as one JSON line to the file named by SCRIPTED_PROVIDER_LOG, so
the test can check what reached the model: the tool result, and the thinking
block's signature sent back unchanged.

The script: a request without a tool result gets thinking (text, then a
signature) and a call of core__get_current_time; a request with one gets a text
answer quoting it.

The Gemini route's model (`scripted-gemini` in config.yaml) reaches this
provider through the proxy's own `/v1/chat/completions`: the messages logged are
those LiteLLM's Gemini adapter made of the `generateContent` request.
"""

import json
import os
import time

import litellm
from litellm import CustomLLM
from litellm.types.utils import (
    ChatCompletionDeltaToolCall,
    Delta,
    Function,
    ModelResponseStream,
    StreamingChoices,
    Usage,
)

SIGNATURE = "sig-EqQBCkgIARABGAIiQL/+scripted==signature"
THINKING = "The user wants the time. I should call the clock tool."


def _chunk(delta, finish_reason=None, usage=None):
    chunk = ModelResponseStream(
        id="chatcmpl-scripted",
        created=int(time.time()),
        model="scripted",
        choices=[StreamingChoices(index=0, delta=delta, finish_reason=finish_reason)],
    )
    if usage is not None:
        chunk.usage = usage
    return chunk


def _log(messages, kwargs):
    path = os.environ.get("SCRIPTED_PROVIDER_LOG")
    if not path:
        return
    params = kwargs.get("optional_params") or {}
    with open(path, "a", encoding="utf-8") as log:
        log.write(json.dumps({"messages": messages, "optional_params": params}, default=str))
        log.write("\n")


class Scripted(CustomLLM):
    async def astreaming(self, model, messages, *args, **kwargs):
        _log(messages, kwargs)
        results = [m for m in messages if m.get("role") == "tool"]
        if not results:
            yield _chunk(Delta(
                reasoning_content=THINKING,
                thinking_blocks=[{"type": "thinking", "thinking": THINKING}],
            ))
            yield _chunk(Delta(
                reasoning_content="",
                thinking_blocks=[{"type": "thinking", "thinking": "", "signature": SIGNATURE}],
            ))
            call = ChatCompletionDeltaToolCall(
                id="toolu_scripted_1",
                type="function",
                index=0,
                function=Function(name="core__get_current_time", arguments='{"timezone": "UTC"}'),
            )
            yield _chunk(Delta(tool_calls=[call]))
            yield _chunk(Delta(), "tool_calls", Usage(prompt_tokens=20, completion_tokens=12, total_tokens=32))
            return
        result = results[-1].get("content")
        if isinstance(result, list):
            result = "".join(part.get("text", "") for part in result if isinstance(part, dict))
        for piece in ["The clock tool says: ", str(result)]:
            yield _chunk(Delta(content=piece))
        yield _chunk(Delta(), "stop", Usage(prompt_tokens=40, completion_tokens=8, total_tokens=48))

    def streaming(self, *args, **kwargs):
        raise litellm.exceptions.APIConnectionError(
            message="the scripted provider streams only asynchronously",
            llm_provider="scripted",
            model="scripted",
        )


handler = Scripted()
