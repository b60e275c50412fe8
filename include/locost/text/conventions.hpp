// What a tokenizer directory's files may leave open and the model family then settles: the
// numbering of a SentencePiece model's pieces. PegasusTokenizer puts its own special tokens below
// an offset (103) and numbers piece p as p + 103; its tokenizer_config.json says so ("offset"),
// but a checkpoint may ship only spiece.model, and then the family (Pegasus-X) knows.
// text/ never reads config.json: models/registry.hpp asks the checkpoint's family for these.
#pragma once

namespace locost::text {

struct tokenizer_conventions {
    int sentencepiece_id_offset = 0;  // used when no tokenizer_config.json names a Pegasus tokenizer
};

}  // namespace locost::text
