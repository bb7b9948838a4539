"""SentencePiece tokenizer with ALBERT's preprocessing."""
from .albert_tokenizer import AlbertTokenizer, TokenizerError, train_sentencepiece, SPIECE_UNDERLINE

__all__ = ["AlbertTokenizer", "TokenizerError", "train_sentencepiece", "SPIECE_UNDERLINE"]
