# A sequence classifier on nn.TransformerEncoder: token embedding plus a learned position
# table, 4 encoder layers (batch_first), mean pooling, a linear head.
import torch
import torch.nn as nn

VOCAB, WIDTH, MAX_LEN, CLASSES = 1000, 128, 256, 5


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.pos = nn.Parameter(torch.zeros(1, MAX_LEN, WIDTH))
        layer = nn.TransformerEncoderLayer(WIDTH, nhead=4, dim_feedforward=4 * WIDTH, dropout=0.0,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=4)
        self.head = nn.Linear(WIDTH, CLASSES)

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos[:, :tokens.shape[1]]
        x = self.encoder(x)
        return self.head(x.mean(dim=1))


def model():
    return Classifier()


def batch(batch_size, seq_len):
    return torch.randint(0, VOCAB, (batch_size, seq_len)), torch.randint(0, CLASSES, (batch_size,))
