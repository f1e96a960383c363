/*
 * GPT-2's byte-level BPE tokenizer: text (UTF-8 bytes) <-> token ids.
 *
 * Encoding, as OpenAI's encoder.py and the npm package gpt-3-encoder do it:
 *   1. Split the text into pieces with GPT-2's pattern
 *        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *      (run with PCRE2 in UTF mode), so a word keeps its leading space and a run of spaces gives
 *      its last space to the next word.
 *   2. Map each byte of a piece to one of 256 printable characters (bytes that are printable
 *      Latin-1 stand for themselves, the other 68 get U+0100..U+0143), so every byte string is
 *      spelled with vocabulary symbols and no text is ever "unknown".
 *   3. Merge adjacent symbols, lowest merge rank first, until no ranked pair is left; each symbol
 *      left is a token.
 *
 * Reference behaviour matched exactly (tests/data/tokenizer_cases.txt holds gpt-3-encoder's ids):
 *   - \s means JavaScript's \s (the reference runs the pattern as a /u JavaScript regex): tab,
 *     LF, VT, FF, CR, U+FEFF, U+2028, U+2029 and every Zs space (U+0020, U+00A0, U+3000...).
 *     Python's `regex` module, which OpenAI's encoder.py uses, takes \s as Unicode White_Space;
 *     the two differ only at U+0085 (a space for Python) and U+FEFF (a space for JavaScript), so
 *     texts holding those two characters may split differently there.
 *   - "<|endoftext|>" inside a text is plain text (ids 27,91,437,1659,5239,91,29), never id 50256:
 *     the reference has no special-token handling in encode.  A caller that wants the
 *     end-of-text token appends vkg_tokenizer_eot() itself.
 *   - Contractions match lowercase only: "'S" splits as "'" then "S".
 *
 * Decoding concatenates the raw bytes of each token, so decode(encode(x)) == x byte for byte.
 * The result is not always valid UTF-8: ids that split a character (a prefix of an encoded
 * sequence, or ids made up by hand) give the bytes they stand for, as they are.
 *
 * Files: a directory holding tokenizer.json (Hugging Face tokenizers' one file, which the fast
 * tokenizer reads), vocab.json + merges.txt (Hugging Face's names) or encoder.json + vocab.bpe
 * (OpenAI's names; both in data/gpt2-tokenizer/).  vocab.json maps each
 * token, spelled in the byte alphabet of step 2, to an id; ids must be 0..N-1 for N entries.
 * merges.txt holds one merge a line, "LEFT RIGHT", in rank order, after an optional first line
 * starting with '#'.  If the same pair is listed twice the later rank counts, as in the
 * reference.
 *
 * tokenizer.json is read as tokenizers writes it for GPT-2: model.type "BPE" (or no type), with
 * model.vocab (token -> id, as vocab.json) and model.merges in rank order, each "LEFT RIGHT" or
 * ["LEFT", "RIGHT"] (newer tokenizers write pairs); added_tokens, whose ids join the vocabulary
 * (a token both list must have one id); a ByteLevel pre-tokenizer without add_prefix_space, or
 * none; no normalizer.  Any other model type or setting that changes the ids is refused by name.
 * Added tokens are not matched inside a text: "<|endoftext|>" stays plain text, as above.
 *
 * A loaded tokenizer is read-only: encode and decode may run on several threads at once.
 */
#ifndef VKG_IO_TOKENIZER_H
#define VKG_IO_TOKENIZER_H

#include "vkgraph_model.h"

/* The functions (vkg_tokenizer_load, _encode, _decode, _token_bytes, _vocab_size, _eot,
 * _present) are public: vkgraph_model.h declares them. */

#endif
