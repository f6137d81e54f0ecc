"""The preview's PNG encoder: lossless, readable by Pillow, with its text chunks."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from examples.preview.child.drawing.encode import encode_png
from examples.preview.child.drawing.render import render, report_of


def _noisy(width: int, height: int) -> Image.Image:
    pixels = np.random.default_rng(7).integers(0, 256, (height, width, 3), dtype=np.uint8)
    return Image.fromarray(pixels, "RGB")


@pytest.mark.parametrize("level", [0, 3, 9])
def test_pillow_reads_back_the_same_pixels_and_text(level: int) -> None:
    image = _noisy(37, 11)
    png = encode_png(image, {"preview-report": '{"a": 1}', "Comment": "caf\u00e9"}, level=level)
    with Image.open(io.BytesIO(png)) as back:
        assert back.mode == "RGB"
        assert back.size == (37, 11)
        assert np.array_equal(np.asarray(back), np.asarray(image))
        assert back.text == {"preview-report": '{"a": 1}', "Comment": "caf\u00e9"}


def test_a_drawing_keeps_its_report_and_is_deterministic() -> None:
    observation = {"run_id": 1, "name": "empty", "status": "empty", "dependents": []}
    png = render(observation, "thumbnail")
    assert png == render(observation, "thumbnail")
    assert report_of(png)["size"] == [160, 120]


@pytest.mark.parametrize(
    ("image", "text", "level", "words"),
    [
        (Image.new("L", (4, 4)), {}, 3, "RGB images"),
        (Image.new("RGB", (4, 4)), {}, 10, "level must be"),
        (Image.new("RGB", (4, 4)), {}, True, "level must be"),
        (Image.new("RGB", (4, 4)), {"k": "\u03a9"}, 3, "must be Latin-1"),
        (Image.new("RGB", (4, 4)), {"": "x"}, 3, "1 to 79 characters"),
        (Image.new("RGB", (4, 4)), {"k" * 80: "x"}, 3, "1 to 79 characters"),
    ],
)
def test_bad_input_is_refused(image: Image.Image, text: dict[str, str], level: int,
                              words: str) -> None:  # fmt: skip
    with pytest.raises(ValueError, match=words):
        encode_png(image, text, level=level)
