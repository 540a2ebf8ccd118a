# An LSTM language model as tutorials write it: embedding, two-layer nn.LSTM (batch_first),
# dropout, a linear decoder tied to the embedding. The sequence length is fixed (BPTT chunks).
import torch
import torch.nn as nn

VOCAB, DIM, LAYERS, BPTT = 120, 32, 2, 12


class LSTMLanguageModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.lstm = nn.LSTM(DIM, DIM, num_layers=LAYERS, batch_first=True, dropout=0.2)
        self.drop = nn.Dropout(0.2)
        self.decoder = nn.Linear(DIM, VOCAB)
        self.decoder.weight = self.embed.weight

    def forward(self, ids):
        out, _state = self.lstm(self.drop(self.embed(ids)))
        return self.decoder(self.drop(out))


def model():
    return LSTMLanguageModel()


def batch(batch_size):
    ids = torch.randint(0, VOCAB, (batch_size, BPTT + 1))
    return ids[:, :-1], ids[:, 1:]
