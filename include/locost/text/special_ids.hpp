// The special token ids a tokenizer defines, as one plain struct every tokenizer returns from
// special_ids(), so that code building model inputs by hand (a BART demo checkpoint, a decoder
// start token) reads them from the tokenizer instead of assuming a family's numbers.
// -1 means the tokenizer has no such token (T5's SentencePiece model has no BOS, no mask).
#pragma once

namespace locost::text {

struct special_ids {
    int bos = -1;   // beginning of sequence: BART `<s>` (0)
    int eos = -1;   // end of sequence: BART `</s>` (2), T5 `</s>` (1)
    int pad = -1;   // padding: BART `<pad>` (1), T5 `<pad>` (0)
    int unk = -1;   // unknown piece: BART `<unk>` (3), T5 `<unk>` (2)
    int mask = -1;  // masked-LM mask: BART `<mask>`
};

}  // namespace locost::text
