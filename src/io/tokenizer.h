/*
 * Tokenizers as transformers' fast tokenizers (Hugging Face tokenizers) run them: text (UTF-8
 * bytes) <-> token ids.  docs/TOKENIZERS.md lists what is read and the behaviour matched.
 *
 * Files, looked for in this order (as AutoTokenizer prefers tokenizer.json):
 *   - tokenizer.json: a pipeline of components, each chosen by its "type" and built by its unit
 *     (tok_internal.h): normalizer, pre-tokenizer, BPE model, post-processor, decoder, and the
 *     added tokens found inside a text before the model runs.
 *   - vocab.json + merges.txt, or OpenAI's encoder.json + vocab.bpe (data/gpt2-tokenizer/):
 *     GPT-2's byte-level BPE, with "<|endoftext|>" a special token as transformers registers it.
 *     vocab.json maps each token, spelled in the byte alphabet, to an id (ids 0..N-1); merges.txt
 *     holds one merge a line, "LEFT RIGHT", in rank order, after an optional '#' first line; a pair
 *     listed twice keeps the later rank, as the reference does.
 *
 * GPT-2's split pattern takes \s as JavaScript defines it (the reference encoder runs it as a /u
 * JavaScript regex): Python's `regex` module, which OpenAI's encoder.py uses, differs only at
 * U+0085 and U+FEFF.  With these files a pair of equal rank is merged everywhere before any pair
 * those merges make (OpenAI's rounds); tokenizer.json's BPE takes new pairs at once (tokenizers);
 * the two differ only for merge lists in which a new pair outranks the merge that made it.
 *
 * Encoding refuses invalid UTF-8 with the offset of the first bad byte (transformers takes
 * Python strings, which cannot hold it).  Decoding gives the bytes of byte-level tokens as they
 * are, so a prefix of ids may end inside a character (tokenizers would write U+FFFD there).
 *
 * A loaded tokenizer is read-only: encode and decode may run on several threads at once.
 */
#ifndef VKG_IO_TOKENIZER_H
#define VKG_IO_TOKENIZER_H

#include "vkgraph_model.h"

/* The functions (vkg_tokenizer_load, _encode, _decode, _token_bytes, _vocab_size, _eot,
 * _present) are public: vkgraph_model.h declares them. */

#endif
