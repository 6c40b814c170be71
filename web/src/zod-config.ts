// Imported first (before the AI SDK): zod, which the SDK uses to validate every
// stream chunk, would otherwise probe `new Function` to compile its parsers, a
// probe the page's content security policy (script-src 'self', no
// 'unsafe-eval') blocks and reports. The interpreted parsers are used instead.
import { config } from 'zod/v4/core';

config({ jitless: true });
