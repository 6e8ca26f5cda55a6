"""Train a small CNN, then export it to ONNX with torch.onnx.export (input/output names, a dynamic batch
axis, opset 17, the TorchScript-based exporter via dynamo=False), check the file with onnx.checker and
run it in onnxruntime on a batch size other than the one exported, comparing with the model's own
eval-mode output; an LSTM sequence classifier goes the same way.
"""
import os
import tempfile

import numpy as np
from sklearn.datasets import load_digits

from _common import main, sync_init


def run(torch, nn, F, init=None, epochs=1, deterministic=False, log=print):
    import onnx
    import onnxruntime as ort
    torch.manual_seed(0)
    X, y = load_digits(return_X_y=True)
    X = torch.tensor(X[:256] / 16.0, dtype=torch.float32).view(-1, 1, 8, 8)
    y = torch.tensor(y[:256])

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                          nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(),
                                          nn.AdaptiveAvgPool2d(1))
            self.classifier = nn.Sequential(nn.Flatten(), nn.Dropout(0.0 if deterministic else 0.2), nn.Linear(16, 10))

        def forward(self, x):
            return F.log_softmax(self.classifier(self.features(x)), dim=1)

    class SeqNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(8, 12, batch_first=True)
            self.fc = nn.Linear(12, 10)

        def forward(self, x):
            out, _ = self.lstm(x)
            return self.fc(out[:, -1])

    models = {"cnn": Net(), "lstm": SeqNet()}
    inputs = {"cnn": X, "lstm": X.view(-1, 8, 8)}
    init_state = {k: sync_init(torch, m, None if init is None else init[k]) for k, m in models.items()}
    losses, results = [], {}
    for name, model in models.items():
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        data = inputs[name]
        for epoch in range(epochs):
            for k in range(0, 192, 32):
                loss = F.cross_entropy(model(data[k:k + 32]), y[k:k + 32])
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
        model.eval()
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, f"{name}.onnx")
            torch.onnx.export(model, (data[:4],), path, input_names=["input"], output_names=["logits"],
                              dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}}, opset_version=17,
                              dynamo=False)
            proto = onnx.load(path)
            onnx.checker.check_model(proto)
            sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            test = data[192:256]
            onnx_out = sess.run(None, {"input": test.numpy()})[0]
        with torch.no_grad():
            ref = model(test).numpy()
        results[name] = {"max_diff_ok": bool(np.abs(onnx_out - ref).max() < 1e-4), "onnx_out": onnx_out.tolist(),
                         "inputs": [i.name for i in sess.get_inputs()], "outputs": [o.name for o in sess.get_outputs()],
                         "batch_dim": proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param,
                         "acc": float((onnx_out.argmax(1) == y[192:256].numpy()).mean())}
        log(f"{name}: onnxruntime matches the model: {results[name]['max_diff_ok']}, accuracy {results[name]['acc']:.3f}")
    return {"losses": losses, "init": init_state,
            "names": {k: (v["inputs"], v["outputs"], v["batch_dim"]) for k, v in results.items()},
            "matches": {k: v["max_diff_ok"] for k, v in results.items()},
            "onnx_out": {k: v["onnx_out"] for k, v in results.items()},
            "acc": {k: v["acc"] for k, v in results.items()}}


if __name__ == "__main__":
    main(run)
