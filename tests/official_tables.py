"""The contractions table of the official VQA-family scorers, typed out for the tests.

Transcribed one entry per line from ``EvalAIAnswerProcessor.CONTRACTIONS`` in facebookresearch/mmf
``mmf/utils/m4c_evaluators.py`` (commit 2dc099af7ce267561e4c2ae033c27eb36be5b3ea). The same 120
entries, in the same order, make up ``self.contractions`` of GT-Vision-Lab/VQA
``PythonEvaluationTools/vqaEvaluation/vqaEval.py`` (commit a013f0043c1e) and ``_CONTRACTIONS``
of google-research ``encyclopedic_vqa/evaluation_utils.py`` (commit 8d8a4f1b2775). hammr's copy
(``hammr.eval.metrics.vqa_tables``) was typed separately from the VQA script; the tests compare
the two.
"""

from __future__ import annotations

_ENTRIES = """
aint ain't
arent aren't
cant can't
couldve could've
couldnt couldn't
couldn'tve couldn't've
couldnt've couldn't've
didnt didn't
doesnt doesn't
dont don't
hadnt hadn't
hadnt've hadn't've
hadn'tve hadn't've
hasnt hasn't
havent haven't
hed he'd
hed've he'd've
he'dve he'd've
hes he's
howd how'd
howll how'll
hows how's
Id've I'd've
I'dve I'd've
Im I'm
Ive I've
isnt isn't
itd it'd
itd've it'd've
it'dve it'd've
itll it'll
let's let's
maam ma'am
mightnt mightn't
mightnt've mightn't've
mightn'tve mightn't've
mightve might've
mustnt mustn't
mustve must've
neednt needn't
notve not've
oclock o'clock
oughtnt oughtn't
ow's'at 'ow's'at
'ows'at 'ow's'at
'ow'sat 'ow's'at
shant shan't
shed've she'd've
she'dve she'd've
she's she's
shouldve should've
shouldnt shouldn't
shouldnt've shouldn't've
shouldn'tve shouldn't've
somebody'd somebodyd
somebodyd've somebody'd've
somebody'dve somebody'd've
somebodyll somebody'll
somebodys somebody's
someoned someone'd
someoned've someone'd've
someone'dve someone'd've
someonell someone'll
someones someone's
somethingd something'd
somethingd've something'd've
something'dve something'd've
somethingll something'll
thats that's
thered there'd
thered've there'd've
there'dve there'd've
therere there're
theres there's
theyd they'd
theyd've they'd've
they'dve they'd've
theyll they'll
theyre they're
theyve they've
twas 'twas
wasnt wasn't
wed've we'd've
we'dve we'd've
weve we've
werent weren't
whatll what'll
whatre what're
whats what's
whatve what've
whens when's
whered where'd
wheres where's
whereve where've
whod who'd
whod've who'd've
who'dve who'd've
wholl who'll
whos who's
whove who've
whyll why'll
whyre why're
whys why's
wont won't
wouldve would've
wouldnt wouldn't
wouldnt've wouldn't've
wouldn'tve wouldn't've
yall y'all
yall'll y'all'll
y'allll y'all'll
yall'd've y'all'd've
y'alld've y'all'd've
y'all'dve y'all'd've
youd you'd
youd've you'd've
you'dve you'd've
youll you'll
youre you're
youve you've
"""

CONTRACTION_PAIRS: list[tuple[str, str]] = [
    (line.split()[0], line.split()[1]) for line in _ENTRIES.strip().splitlines()
]
"""(key, value) in the file's order."""
